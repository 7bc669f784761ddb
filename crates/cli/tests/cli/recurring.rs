//! `schedule --every DUR|CRON`: a recurring task waits as its template and the gateway
//! makes a fresh copy each time, on time, one at a time, and folds the times it missed
//! while it was down into one copy that says so.

use std::collections::BTreeSet;
use std::time::SystemTime;

use board_core::{BoardSnapshot, Status, Task, TaskId};

use crate::common::{get, Board};
use crate::gateway_board::{check_board, worker_profile, GatewayBoard, Setup};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn every_makes_a_template_shown_with_its_rule_and_bad_rules_write_nothing() {
    let board = Board::init();
    let id = board.create(&["nightly report", "--assignee", "coder"]);
    let said = board.ok(&["schedule", &id, "--every", "2h"]);
    assert!(
        said.starts_with(&format!("Scheduled {id} until ")) && said.ends_with(", then every 2h\n"),
        "{said}"
    );
    let template = get(&board, &id);
    let first = template.scheduled_until.expect("a first time");
    assert!((now() + 7190..=now() + 7200).contains(&first), "{first}");
    let (_, listed, _) = board.outcome(&["list", "--status", "scheduled"], &[("COLUMNS", "160")]);
    assert!(listed.contains("then every 2h"), "{listed}");
    assert!(board
        .ok(&["show", &id])
        .contains("repeats: every 2h, 0 copies made"));

    let weekdays = board.create(&["standup notes"]);
    let shown = board.json(&[
        "schedule",
        &weekdays,
        "--every",
        "0 9 * * 1-5",
        "--tz",
        "Europe/Paris",
    ]);
    assert_eq!(
        shown["recurrence"]["every"]["cron"],
        serde_json::json!({"expr": "0 9 * * 1-5", "zone": "Europe/Paris"})
    );
    // Its first time is a weekday at 09:00 in Paris (08:00 or 07:00 UTC).
    let at = jiff::Timestamp::from_second(shown["scheduled_until"].as_i64().unwrap()).unwrap();
    let paris = at.to_zoned(jiff::tz::TimeZone::get("Europe/Paris").unwrap());
    assert_eq!((paris.hour(), paris.minute()), (9, 0), "{paris}");
    assert!(paris.weekday().to_monday_one_offset() <= 5, "{paris}");

    let other = board.create(&["x"]);
    let before = board.snapshot();
    for (args, said) in [
        (&["--every", "often"][..], "not a period or a cron expression"),
        (&["--every", "61 9 * * *"], "not a cron expression"),
        (&["--every", "0 0 9 * * 1-5"], "not a cron expression"),
        (
            &["--every", "0 9 * * *", "--tz", "Mars/Olympus"],
            "not a time zone here",
        ),
        (&["--tz", "UTC"], "--every"),
        (&["--every", "0s"], "not a period or a cron expression"),
    ] {
        let mut all = vec!["schedule", other.as_str()];
        all.extend_from_slice(args);
        let (code, _, err) = board.outcome(&all, &[]);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(said) && err.lines().count() <= 2, "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before);
}

/// The copies of `template` on the board, by the time each was made for.
fn copies(board: &BoardSnapshot, template: &TaskId) -> Vec<(i64, Task)> {
    let prefix = format!("recur:{template}:");
    let mut copies: Vec<(i64, Task)> = board
        .tasks
        .iter()
        .filter_map(|t| {
            let due = t
                .idempotency_key
                .as_deref()?
                .strip_prefix(&prefix)?
                .parse()
                .ok()?;
            Some((due, t.clone()))
        })
        .collect();
    copies.sort_by_key(|(due, _)| *due);
    copies
}

/// With a 30 s tick, a task repeating every second gets a copy each time it comes (the
/// gateway ticks at the template's time), each copy runs to done, and after the gateway
/// was down for several times, one copy is made for all of them, its event counting the
/// missed ones; then the copies go on.
#[test]
fn a_recurring_task_copies_on_time_and_folds_the_times_missed_while_the_gateway_was_down() {
    let profiles = worker_profile("quick", "kanban complete --result ok");
    let mut board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 2,
        interval_seconds: 30.0,
        ..Setup::default()
    });
    let template = board.create(&["heartbeat check", "--assignee", "quick"]);
    board.kanban_ok(&["schedule", template.as_str(), "--every", "1s"]);
    board.start_gateway();
    board.wait_for("two copies done", || {
        let copies = copies(&board.snapshot(), &template);
        copies.iter().filter(|(_, t)| t.status == Status::Done).count() >= 2
    });
    board.sigkill_running_gateway();
    board.wait_for("every copy done", || {
        copies(&board.snapshot(), &template)
            .iter()
            .all(|(_, t)| t.status == Status::Done)
    });
    let before = copies(&board.snapshot(), &template).len();
    let due = board.task(&template).scheduled_until.expect("its next time");
    // The gateway stays down while the template's time and two more pass.
    board.wait_for("three of its times to pass", || now() >= due + 2);
    board.start_gateway();
    board.wait_for("two more copies done", || {
        let copies = copies(&board.snapshot(), &template);
        copies.len() >= before + 2 && copies.iter().all(|(_, t)| t.status == Status::Done)
    });
    board.sigkill_running_gateway();

    let snapshot = board.snapshot();
    let made = copies(&snapshot, &template);
    let caught_up = &made[before];
    assert_eq!(
        caught_up.0, due,
        "the first copy after the restart is for the time missed first"
    );
    let events: Vec<_> = snapshot
        .events
        .iter()
        .filter(|e| e.task_id == template && e.kind == "recurred")
        .collect();
    let folded = events
        .iter()
        .find(|e| e.payload["due"] == due)
        .expect("a recurred event for the first missed time");
    assert_eq!(folded.payload["copy"], caught_up.1.id.as_str());
    let missed = folded.payload["missed"].as_i64().unwrap();
    assert!(missed >= 2, "{folded:?}");
    // None of the folded times got a copy of its own: the next copy is for a time after
    // the one the catch-up moved to.
    let next = folded.payload["next"].as_i64().unwrap();
    assert_eq!(next, due + missed + 1);
    assert!(made[before + 1].0 >= next, "{:?}", made[before + 1].0);
    // One copy per time, and as many as the events recorded.
    let times: BTreeSet<i64> = made.iter().map(|(due, _)| *due).collect();
    assert_eq!(times.len(), made.len());
    let recorded = events.iter().filter(|e| !e.payload["copy"].is_null()).count();
    assert_eq!(recorded, made.len());
    let rule = board.task(&template).recurrence.expect("still recurring");
    assert_eq!(rule.copies as usize, made.len());
    check_board(&snapshot).unwrap();
}
