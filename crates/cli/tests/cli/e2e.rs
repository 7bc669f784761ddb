//! The end-to-end suite (docs/testing.md): a real gateway process (`kanban gateway run`), a fake
//! model server, the CLI as the only way in, and verdicts read only from `kanban.db`
//! (opened read-only) and the fake server's request log.
//!
//! Ticks are counted with probe cards, never with sleeps: a probe is a triage card the
//! gateway decomposes into a single task; K probes moved out of triage one after the
//! other prove at least K ticks.

use crate::gateway_board;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use board_core::{BoardReads, BoardSnapshot, EventFilter, LlmLedger, Outcome, Status, TaskId};
use fake_llm::Reply;
use gateway_board::{worker_profile, GatewayBoard, Setup, KANBAN, WAIT};

/// A board with docs/testing.md's end-to-end config: a 1 s tick, auto-decompose on, 10 per
/// tick, no transient retries; `max_spawn` and profiles as the case needs.
fn board(max_spawn: usize, kanban_extra: &str, profiles: &str) -> GatewayBoard {
    GatewayBoard::new(Setup {
        max_spawn,
        kanban_extra,
        profiles,
        interval_seconds: 1.0,
        ..Setup::default()
    })
}

fn children_of(snapshot: &BoardSnapshot, parent: &TaskId) -> Vec<TaskId> {
    snapshot
        .links
        .iter()
        .filter(|l| &l.parent_id == parent)
        .map(|l| l.child_id.clone())
        .collect()
}

/// `kanban.decompose_failure_limit` in the billing test: the most requests one card gets.
const FAILURE_LIMIT: usize = 3;

#[test]
fn a_card_whose_reply_is_always_bad_is_billed_three_times_then_parked() {
    // A 1 s retry base makes the policy's three attempts fit in a few ticks (delays of
    // 1 s and 2 s), so the limit, not the backoff, is what stops the billing.
    let policy = format!("  decompose_retry_base_seconds: 1\n  decompose_failure_limit: {FAILURE_LIMIT}\n");
    let mut b = board(0, &policy, "");
    b.reply(
        "always malformed",
        Reply::text("I would split this into some tasks, probably."),
    );
    b.reply("always 500", Reply::error(500, "upstream exploded"));
    let malformed = b.create(&["always malformed", "--triage"]);
    let failing = b.create(&["always 500", "--triage"]);
    b.start_gateway();
    let cards = [&malformed, &failing];
    // A card that reaches the limit unparked, or gets a fourth request, ends the wait too.
    b.wait_for("both cards to reach the failure limit", || {
        cards.iter().all(|id| {
            let task = b.task(id);
            task.decompose_parked
                || task.decompose_failures >= FAILURE_LIMIT as i64
                || b.bills(id) > FAILURE_LIMIT
        })
    });
    for id in cards {
        let task = b.task(id);
        assert!(task.decompose_parked, "{id} is not parked: {task:?}");
        assert_eq!(task.decompose_failures, FAILURE_LIMIT as i64);
        assert_eq!(b.bills(id), FAILURE_LIMIT, "{id} billed once per attempt");
    }
    // Had parking not held, each card's next attempt would be due at its
    // `decompose_next_attempt_at`: let the gateway tick past both, then prove that any
    // decomposition those ticks started has had its turn.
    let due = cards
        .iter()
        .map(|id| b.task(id).decompose_next_attempt_at.expect("a retry time"))
        .max()
        .unwrap();
    b.wait_for("a tick after both retry times", || last_tick_at(&b) > due);
    b.prove_ticks(2);
    let snapshot = b.snapshot();
    for id in cards {
        let bills = b.bills(id);
        eprintln!("{id}: {bills} requests over {} proven ticks", b.probes);
        assert_eq!(bills, FAILURE_LIMIT, "{id} billed after it was parked");
        assert_eq!(b.task(id).status, Status::Triage);
        let kinds = b.kinds(id);
        let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
        assert_eq!(count("auto_decompose_failed"), FAILURE_LIMIT, "{kinds:?}");
        assert_eq!(count("auto_decompose_parked"), 1, "{kinds:?}");
        assert_eq!(count("decomposed"), 0, "{kinds:?}");
        assert!(children_of(&snapshot, id).is_empty());
        assert!(snapshot.links.iter().all(|l| &l.child_id != id));
        let calls = b.db().llm_calls(Some(id)).unwrap();
        assert_eq!(calls.len(), FAILURE_LIMIT, "every request is billed");
    }
    let calls = b.db().llm_calls(Some(&failing)).unwrap();
    assert!(calls.iter().all(|c| c.http_status == Some(500)));
}

#[test]
fn a_valid_three_child_reply_is_billed_once_and_committed_whole() {
    let mut b = board(0, "", "");
    b.start_gateway();
    let reply = r#"{"fanout": true, "rationale": "three parts", "tasks": [
        {"title": "schema", "body": "a", "assignee": "idle", "parents": []},
        {"title": "docs", "body": "b", "assignee": "idle", "parents": []},
        {"title": "api", "body": "c", "assignee": "idle", "parents": [0]}]}"#;
    b.reply("build the thing", Reply::text(reply));
    let root = b.create(&["build the thing", "--triage"]);
    b.wait_for("the decomposition", || b.task(&root).status != Status::Triage);
    b.prove_ticks(7);
    assert_eq!(b.bills(&root), 1, "billed exactly once");
    let snapshot = b.snapshot();
    let decomposed: Vec<_> = b
        .db()
        .events(&EventFilter {
            task_id: Some(root.clone()),
            ..EventFilter::default()
        })
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "decomposed")
        .collect();
    assert_eq!(decomposed.len(), 1);
    let child_ids: Vec<TaskId> = serde_json::from_value(decomposed[0].payload["child_ids"].clone()).unwrap();
    assert_eq!(child_ids.len(), 3);
    let titles: Vec<String> = child_ids.iter().map(|c| b.task(c).title).collect();
    assert_eq!(titles, ["schema", "docs", "api"], "ids in reply order");
    for child in &child_ids {
        assert!(
            snapshot
                .links
                .iter()
                .any(|l| &l.parent_id == child && l.child_id == root),
            "root under {child}"
        );
    }
    assert!(snapshot
        .links
        .iter()
        .any(|l| l.parent_id == child_ids[0] && l.child_id == child_ids[2]));
    assert_eq!(b.task(&root).status, Status::Todo);
    assert_eq!(snapshot.tasks.len(), 1 + 3 + b.probes);
}

#[test]
fn a_500_child_reply_through_the_cli_makes_one_request_and_no_rows() {
    let b = board(0, "", "");
    let many: Vec<String> = (0..500)
        .map(|i| format!(r#"{{"title": "part {i}", "parents": []}}"#))
        .collect();
    b.reply(
        "huge",
        Reply::text(format!(r#"{{"fanout": true, "tasks": [{}]}}"#, many.join(","))),
    );
    let root = b.create(&["huge", "--triage"]);
    let out = b.kanban(&["decompose", root.as_str(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["ok"], false);
    assert!(
        outcome["reason"].as_str().unwrap().contains("limit is 16"),
        "{outcome}"
    );
    assert_eq!(b.bills(&root), 1);
    let snapshot = b.snapshot();
    assert_eq!(snapshot.tasks.len(), 1);
    assert_eq!(b.task(&root).status, Status::Triage);
}

#[test]
fn a_card_with_execution_history_is_never_billed_by_the_gateway() {
    let mut b = board(0, "", "");
    let card = b.create(&["ran before"]);
    for _ in 0..2 {
        b.kanban_ok(&["claim", card.as_str()]);
        b.kanban_ok(&["block", card.as_str(), "no gpu", "--kind", "capability"]);
        if b.task(&card).status == Status::Blocked {
            b.kanban_ok(&["unblock", card.as_str()]);
        }
    }
    assert_eq!(b.task(&card).status, Status::Triage);
    b.start_gateway();
    b.prove_ticks(7);
    assert_eq!(b.bills(&card), 0);
    assert_eq!(b.task(&card).status, Status::Triage);
}

const TRIVIAL_WORKER: &str = "kanban complete --result done";

#[test]
fn a_hanging_model_does_not_stall_spawning() {
    let mut b = board(2, "", &worker_profile("worker", TRIVIAL_WORKER));
    b.reply("hangs", Reply::Hang);
    b.start_gateway();
    let hung = b.create(&["hangs", "--triage"]);
    b.wait_for("the hanging request", || b.bills(&hung) == 1);
    let tasks: Vec<TaskId> = (0..2)
        .map(|i| b.create(&[&format!("ready {i}"), "--assignee", "worker"]))
        .collect();
    b.prove_ticks(2);
    for t in &tasks {
        assert!(
            !b.db().runs(t).unwrap().is_empty(),
            "{t} was spawned within 2 ticks"
        );
    }
    assert_eq!(b.task(&hung).status, Status::Triage);
}

#[test]
fn workers_end_with_the_right_outcomes() {
    let profiles = [
        worker_profile("finisher", TRIVIAL_WORKER),
        worker_profile("quitter", "echo bored; exit 0"),
        worker_profile("crasher", "echo boom >&2; exit 3"),
        worker_profile("limited", "exit 75"),
        worker_profile("sleeper", "exec sleep 60"),
    ]
    .concat();
    let mut b = board(8, "  failure_limit: 2\n", &profiles);
    let finisher = b.create(&["finishes", "--assignee", "finisher"]);
    let quitter = b.create(&["quits", "--assignee", "quitter"]);
    let crasher = b.create(&["crashes", "--assignee", "crasher"]);
    let limited = b.create(&["rate limited", "--assignee", "limited"]);
    let sleeper = b.create(&["sleeps", "--assignee", "sleeper", "--max-runtime", "2s"]);
    b.start_gateway();
    let outcomes = |id: &TaskId| -> Vec<Option<Outcome>> {
        b.db().runs(id).unwrap().iter().map(|r| r.outcome).collect()
    };
    b.wait_for("the finisher", || b.task(&finisher).status == Status::Done);
    assert_eq!(outcomes(&finisher), [Some(Outcome::Completed)]);
    assert_eq!(b.task(&finisher).result.as_deref(), Some("done"));
    b.wait_for("the crasher to be given up", || {
        b.task(&crasher).status == Status::Blocked
    });
    assert_eq!(
        outcomes(&crasher),
        [Some(Outcome::Crashed), Some(Outcome::Crashed)]
    );
    assert!(b.kinds(&crasher).contains(&"gave_up".to_owned()));
    b.wait_for("the quitter", || {
        outcomes(&quitter).first() == Some(&Some(Outcome::ProtocolViolation))
    });
    b.wait_for("the rate-limited worker", || {
        outcomes(&limited).first() == Some(&Some(Outcome::RateLimited))
    });
    let limited_task = b.task(&limited);
    assert_eq!(limited_task.consecutive_failures, 0);
    b.wait_for("the sleeper's timeout", || {
        outcomes(&sleeper).first() == Some(&Some(Outcome::TimedOut))
    });
    let first_sleeper = b.db().runs(&sleeper).unwrap().remove(0);
    let pid = first_sleeper.worker_pid.unwrap();
    b.wait_for("the sleeper to be gone", || {
        !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid)
    });
}

fn is_zombie(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[test]
fn a_restarted_gateway_adopts_live_workers_and_reclaims_dead_ones() {
    let profiles = worker_profile("sleeper", "exec sleep 120");
    let mut b = board(4, "", &profiles);
    let stays = b.create(&["stays alive", "--assignee", "sleeper"]);
    let dies = b.create(&["dies", "--assignee", "sleeper"]);
    b.start_gateway();
    let pid_of = |id: &TaskId| b.task(id).lease.and_then(|l| l.worker_pid);
    b.wait_for("both workers", || {
        pid_of(&stays).is_some() && pid_of(&dies).is_some()
    });
    let (stays_pid, dies_pid) = (pid_of(&stays).unwrap(), pid_of(&dies).unwrap());
    let mut gateway = b.gateway.take().unwrap();
    // SAFETY: signalling processes this test started.
    unsafe { libc::kill(gateway.id() as i32, libc::SIGKILL) };
    exit_within(&mut gateway, WAIT, "the killed gateway");
    unsafe { libc::kill(-(dies_pid as i32), libc::SIGKILL) };
    b.wait_for("the dead worker to go", || is_zombie(dies_pid));
    std::fs::remove_file(b.path().join("gateway.json")).unwrap();
    b.start_gateway();
    b.prove_ticks(2);
    let stays_runs = b.db().runs(&stays).unwrap();
    assert_eq!(stays_runs.len(), 1, "the live worker is adopted, not respawned");
    assert!(stays_runs[0].is_open());
    assert_eq!(b.task(&stays).lease.and_then(|l| l.worker_pid), Some(stays_pid));
    let dies_runs = b.db().runs(&dies).unwrap();
    assert_eq!(
        dies_runs[0].outcome,
        Some(Outcome::Reclaimed),
        "the dead worker's run is reclaimed"
    );
    let open = |id: &TaskId| b.db().runs(id).unwrap().iter().filter(|r| r.is_open()).count();
    assert!(
        open(&stays) <= 1 && open(&dies) <= 1,
        "no task runs twice at once"
    );
}

#[test]
fn a_second_gateway_on_the_same_home_exits_one() {
    let mut b = board(0, "", "");
    b.start_gateway();
    let mut second = b
        .command(&["gateway", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let exited = exit_within(&mut second, WAIT, "the second gateway");
    let mut stderr = String::new();
    second.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(exited.code(), Some(1), "{stderr}");
    assert!(stderr.contains("already running"), "{stderr}");
    let first = b.gateway.as_mut().unwrap();
    assert!(first.try_wait().unwrap().is_none(), "the first keeps running");
    b.prove_ticks(1);
}

/// The gateway's `gateway.json` (written atomically after every tick).
fn gateway_status(b: &GatewayBoard) -> serde_json::Value {
    let text = std::fs::read_to_string(b.path().join("gateway.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn last_tick_at(b: &GatewayBoard) -> i64 {
    gateway_status(b)["last_tick_at"].as_i64().unwrap()
}

/// Waits up to `limit` for `child` to exit; kills it and fails when it does not.
fn exit_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long the model takes over the first call of the shutdown test: far longer than a
/// shutdown, so a gateway that let the call finish would commit its reply before exiting.
const SLOW_REPLY: Duration = Duration::from_secs(20);

#[test]
fn shutdown_cancels_a_model_call_in_flight_and_replace_takes_over() {
    // The decomposer's timeout is longer than the slow reply: only a shutdown ends it.
    let b = &mut GatewayBoard::new(Setup {
        timeout_secs: 30,
        interval_seconds: 1.0,
        ..Setup::default()
    });
    let card = b.create(&["slow thought", "--triage"]);
    let reply = |title: &str| {
        Reply::text(format!(
            r#"{{"fanout": true, "rationale": "r", "tasks": [
            {{"title": "{title} a", "body": "", "assignee": "idle", "parents": []}},
            {{"title": "{title} b", "body": "", "assignee": "idle", "parents": []}}]}}"#
        ))
    };
    // The first call gets a valid reply, late; the next one (the new gateway's) at once.
    b.fake.script_task(
        card.as_str(),
        vec![
            Reply::delayed(SLOW_REPLY, reply("cancelled")),
            reply("taken over"),
        ],
    );
    b.start_gateway();
    b.wait_for("the slow request", || b.bills(&card) == 1);
    let asked = Instant::now();
    let before = b.snapshot();
    let status = gateway_status(b);
    let first_pid = b.gateway.as_ref().unwrap().id();
    assert_eq!(status["pid"], first_pid);
    assert!(status["ticks"].as_u64().unwrap() >= 1);

    // A second gateway with --replace stops the first, which exits 0 with its call
    // cancelled and nothing written.
    let log = std::fs::File::create(b.path().join("gateway2.stderr")).unwrap();
    let second = Command::new(KANBAN)
        .arg("--home")
        .arg(b.path())
        .args(["gateway", "run", "--replace"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut first = b.gateway.replace(second).unwrap();
    let exited = exit_within(&mut first, WAIT, "the replaced gateway");
    let stopped_in = asked.elapsed();
    assert!(
        exited.success(),
        "the replaced gateway exits 0: {exited:?}\n{}",
        b.gateway_log()
    );
    eprintln!("the first gateway stopped {stopped_in:?} after its call began");
    let titles = |s: &BoardSnapshot| -> Vec<String> { s.tasks.iter().map(|t| t.title.clone()).collect() };
    assert!(
        !titles(&b.snapshot()).iter().any(|t| t.starts_with("cancelled")),
        "a child of the cancelled call exists"
    );
    b.wait_for("the new gateway's pid file", || {
        std::fs::read_to_string(b.path().join("gateway.pid"))
            .is_ok_and(|pid| pid.trim() == b.gateway.as_ref().unwrap().id().to_string())
    });
    b.wait_for("the new gateway's decomposition", || {
        b.task(&card).status != Status::Triage
    });
    assert_eq!(b.bills(&card), 2, "one cancelled call, one committed");
    // Neither a decomposition nor a failure of the cancelled call was recorded.
    let kinds = b.kinds(&card);
    let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(count("decomposed"), 1, "{kinds:?}");
    assert_eq!(count("auto_decompose_failed"), 0, "{kinds:?}");
    // The cancelled request was sent, so it is billed: its row stays `sent`.
    let calls = b.db().llm_calls(Some(&card)).unwrap();
    let outcomes: Vec<&str> = calls.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(outcomes, ["sent", "ok"], "{calls:?}");
    let after = b.snapshot();
    let mut new: Vec<String> = titles(&after)
        .into_iter()
        .filter(|t| !titles(&before).contains(t))
        .collect();
    new.sort();
    assert_eq!(
        new,
        ["taken over a", "taken over b"],
        "only the new gateway's reply"
    );
    b.prove_ticks(1);
}
