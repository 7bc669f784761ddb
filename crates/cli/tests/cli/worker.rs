//! Worker mode (`KANBAN_TASK`, `KANBAN_RUN_ID`) and reclaiming a live worker process.

use crate::common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::Duration;

use board_core::{transition::Request, BoardReads, BoardWrites, Outcome, Status};
use common::{get, store, task_id, Board};
use serde_json::json;

fn as_worker(board: &Board, id: &str, run: &str, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = board.kanban(args);
    cmd.env("KANBAN_TASK", id).env("KANBAN_RUN_ID", run);
    cmd
}

#[test]
fn a_worker_completes_its_own_task() {
    let board = Board::init();
    let id = board.create(&["work"]);
    let run = board.ok(&["claim", &id]).trim().to_owned();
    as_worker(&board, &id, &run, &["heartbeat", "--note", "alive"])
        .assert()
        .success();
    as_worker(&board, &id, &run, &["comment", "progress"])
        .assert()
        .success();
    let out = as_worker(
        &board,
        &id,
        &run,
        &["complete", "--result", "the answer", "--json"],
    )
    .output()
    .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(reply, json!({"task_id": id, "ok": true}));
    let task = get(&board, &id);
    assert_eq!(task.status, Status::Done);
    assert_eq!(task.result.as_deref(), Some("the answer"));
    let comments = store(&board).comments(&task_id(&id)).expect("comments");
    assert_eq!(comments[0].body, "progress");
}

#[test]
fn a_worker_whose_channel_descriptor_was_closed_reports_through_the_home() {
    // A process between the worker and `kanban` (Python's subprocess, by default) may
    // close the inherited descriptor: `KANBAN_CHANNEL` then names nothing open.
    let board = Board::init();
    let id = board.create(&["work"]);
    let run = board.ok(&["claim", &id]).trim().to_owned();
    for args in [&["context"][..], &["heartbeat"], &["comment", "still here"]] {
        as_worker(&board, &id, &run, args)
            .env("KANBAN_CHANNEL", "987")
            .assert()
            .success();
    }
    as_worker(&board, &id, &run, &["complete", "--result", "through the home"])
        .env("KANBAN_CHANNEL", "987")
        .assert()
        .success();
    assert_eq!(get(&board, &id).result.as_deref(), Some("through the home"));
}

#[test]
fn a_stale_worker_changes_nothing() {
    let board = Board::init();
    let id = board.create(&["work"]);
    board.ok(&["claim", &id]);
    board.ok(&["reclaim", &id]);
    board.ok(&["claim", &id]);
    let before = board.snapshot();
    for args in [
        &["complete", "--result", "stale"][..],
        &["block", "stale reason", "--kind", "transient"],
        &["heartbeat"],
        &["comment", "a stale note"],
        &["comment", &id, "a stale note on its task by id"],
    ] {
        let out = as_worker(&board, &id, "1", args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("kanban: ") && stderr.contains("not the current run"),
            "{stderr}"
        );
    }
    let out = as_worker(&board, &id, "1", &["complete", "--json"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(reply, json!({"task_id": id, "ok": false}));
    assert_eq!(board.snapshot(), before);
    let comments = store(&board).comments(&task_id(&id)).expect("comments");
    assert!(
        comments.is_empty(),
        "a stale worker's comment landed: {comments:?}"
    );
}

#[test]
fn a_worker_blocks_its_own_task_with_a_reason() {
    let board = Board::init();
    let id = board.create(&["work"]);
    let run = board.ok(&["claim", &id]).trim().to_owned();
    as_worker(
        &board,
        &id,
        &run,
        &["block", "no credentials", "--kind", "needs_input"],
    )
    .assert()
    .success();
    let task = get(&board, &id);
    assert_eq!(task.status, Status::Blocked);
    let events = store(&board)
        .events(&board_core::EventFilter {
            task_id: Some(task_id(&id)),
            ..Default::default()
        })
        .expect("events");
    let blocked = events
        .iter()
        .find(|e| e.kind == "blocked")
        .expect("blocked event");
    assert!(
        blocked.payload.to_string().contains("no credentials"),
        "{}",
        blocked.payload
    );
}

#[test]
fn malformed_worker_variables_are_usage_errors() {
    let board = Board::init();
    let id = board.create(&["work"]);
    let before = board.snapshot();
    for (task, run) in [("nope", "1"), (id.as_str(), "one")] {
        let out = as_worker(&board, task, run, &["complete"]).output().expect("run");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("kanban: KANBAN_"));
    }
    assert_eq!(board.snapshot(), before);
}

/// Records `pid` as the worker of the task's current run, as the gateway would.
fn set_worker(board: &Board, id: &str, pid: u32) {
    let store = store(board);
    let task = store.get(&task_id(id)).expect("task");
    let request = Request::SetWorker {
        run_id: task.current_run_id().expect("running"),
        claim_lock: task.lease.expect("claimed").claim_lock,
        pid: i64::from(pid),
        host: board_home::default_host_id(),
    };
    store
        .transition(&task_id(id), &request, task.updated_at)
        .expect("set worker");
}

/// A worker started as the gateway would start it, reaped from a thread so that a
/// killed worker disappears instead of lingering as our zombie.
struct Worker {
    pid: u32,
    exited: mpsc::Receiver<ExitStatus>,
}

/// How long a reclaimed worker may take to be reaped; the reclaim has already waited
/// for it to die, so this only covers a slow machine.
const REAP_WAIT: Duration = Duration::from_secs(30);

impl Worker {
    /// The worker's exit status, once reaped; kills its group and fails if that takes
    /// longer than `limit`.
    fn exit_within(&self, limit: Duration) -> ExitStatus {
        match self.exited.recv_timeout(limit) {
            Ok(status) => status,
            Err(_) => {
                self.kill();
                panic!("worker {} still runs {limit:?} after its reclaim", self.pid);
            }
        }
    }

    fn kill(&self) {
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
    }
}

impl Drop for Worker {
    /// A test that fails early leaves no worker behind.
    fn drop(&mut self) {
        if matches!(self.exited.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            self.kill();
        }
    }
}

/// Spawns a worker for the task's current run, as the gateway would (its own process
/// group, the run in its environment). The script touches `$READY` once it is set up;
/// this returns only then.
fn spawn_worker(board: &Board, id: &str, script: &str) -> Worker {
    let task = get(board, id);
    let ready = board.home().join(format!("{id}.ready"));
    let mut child = std::process::Command::new("sh")
        .args(["-c", script])
        .env("KANBAN_TASK", id)
        .env(
            "KANBAN_RUN_ID",
            task.current_run_id().expect("running").to_string(),
        )
        .env("READY", &ready)
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let (sender, exited) = mpsc::channel();
    let worker = Worker {
        pid: child.id(),
        exited,
    };
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            let _ = sender.send(status);
        }
    });
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the worker never got ready"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    worker
}

#[test]
fn reclaim_stops_a_live_worker() {
    let board = Board::init();
    let id = board.create(&["work"]);
    board.ok(&["claim", &id]);
    let worker = spawn_worker(&board, &id, "touch \"$READY\"; exec sleep 60");
    set_worker(&board, &id, worker.pid);
    assert_eq!(
        board.json(&["reclaim", &id]),
        json!({"task_id": id, "ok": true, "outcome": "reclaimed"})
    );
    let status = worker.exit_within(REAP_WAIT);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    let runs = store(&board).runs(&task_id(&id)).expect("runs");
    assert_eq!(runs[0].outcome, Some(Outcome::Reclaimed));
    assert_eq!(get(&board, &id).status, Status::Ready);
}

#[test]
fn reclaim_kills_a_worker_that_ignores_sigterm() {
    let board = Board::init();
    let id = board.create(&["work"]);
    board.ok(&["claim", &id]);
    let worker = spawn_worker(
        &board,
        &id,
        "trap '' TERM; touch \"$READY\"; while :; do sleep 1; done",
    );
    set_worker(&board, &id, worker.pid);
    board.ok(&["reclaim", &id]);
    let status = worker.exit_within(REAP_WAIT);
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert_eq!(get(&board, &id).status, Status::Ready);
}
