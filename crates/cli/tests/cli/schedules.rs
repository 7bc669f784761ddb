//! `schedule --at` / `--in`: a task parked until a time, shown with it, and put back to
//! work by the dispatcher once the time has come, not before.

use std::time::{Duration, Instant};

use crate::common::{get, Board, KANBAN};

use board_core::Status;

#[test]
fn a_task_scheduled_in_two_seconds_runs_after_them_and_not_before() {
    let board = Board::init();
    let done = format!("[\"sh\", \"-c\", \"{KANBAN} complete --result ran\"]");
    board.ok(&["config", "set", "profiles.coder.command", &done]);
    let id = board.create(&["nightly report", "--assignee", "coder"]);
    let said = board.ok(&["schedule", &id, "--in", "2s", "after", "the", "freeze"]);
    let scheduled_at = Instant::now();
    assert!(
        said.starts_with(&format!("Scheduled {id} until ")) && said.ends_with(": after the freeze\n"),
        "{said}"
    );
    let until = get(&board, &id).scheduled_until.expect("a time");
    let listed = board.ok(&["list", "--status", "scheduled"]);
    assert!(listed.contains("UNTIL") && listed.contains(&id), "{listed}");
    assert!(board.ok(&["show", &id]).contains("scheduled until"));

    // Before its time, a dispatcher pass leaves it where it is.
    board.ok(&["dispatch"]);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    if now() < until {
        assert_eq!(get(&board, &id).status, Status::Scheduled);
    }
    // Then passes put it back to work and run it.
    while get(&board, &id).status != Status::Done {
        assert!(
            scheduled_at.elapsed() < Duration::from_secs(20),
            "{:?}",
            get(&board, &id)
        );
        board.ok(&["dispatch"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(now() >= until, "it ran before its time");
    let resumed = board.json(&["events", &id, "--kind", "unblocked"]);
    assert_eq!(resumed[0]["payload"]["scheduled_until"], until);
}

#[test]
fn a_time_that_is_not_ahead_or_two_times_are_refused_writing_nothing() {
    let board = Board::init();
    let id = board.create(&["x"]);
    let before = board.snapshot();
    for (args, code, said) in [
        (&["--at", "2001-01-01T00:00:00Z"][..], 1, "is not ahead of now"),
        (&["--at", "yesterday"], 2, "not a time"),
        (
            &["--in", "2h", "--at", "2099-01-01 00:00"],
            2,
            "cannot be used with",
        ),
        (&["--in", "soon"], 2, "--in"),
    ] {
        let mut all = vec!["schedule", id.as_str()];
        all.extend_from_slice(args);
        let (got, _, err) = board.outcome(&all, &[]);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before);
}
