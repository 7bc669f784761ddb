//! Host scoping on one machine: a gateway's process table holds pids that the board
//! records as another host's workers. Processes of the test's own stand for them (one
//! whose environment names its run, as a worker's does, so it would pass the gateway's
//! proof; one whose does not), beside a run whose pid exists nowhere here. While their
//! leases hold, the gateway signals none of them, adopts none, and ends none of their
//! runs (neither reclaimed as gone nor timed out); once the leases lapse it ends each run
//! `stale`, still signalling nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use board_core::transition::Request;
use board_core::{BoardReads, BoardWrites, EventFilter, NewTask, Outcome, Run, RunId, TaskId};

use super::{Shape, SharedBoard};

/// The host the test's processes stand in for.
const ELSEWHERE: &str = "host-elsewhere";

/// A process of the test's own in a group of its own, standing for another host's
/// worker: `sh` that writes a line to its signal file for every SIGTERM and lives on.
struct Lookalike {
    child: Child,
    signals: PathBuf,
}

impl Lookalike {
    fn start(dir: &Path, name: &str, env: &[(&str, String)]) -> Lookalike {
        use std::os::unix::process::CommandExt;
        let signals = dir.join(format!("{name}.signals"));
        let child = Command::new("sh")
            .args([
                "-c",
                "trap 'echo TERM >> \"$SIGNALS\"' TERM; while :; do sleep 0.05; done",
            ])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SIGNALS", &signals)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Lookalike { child, signals }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What was done to it: nothing, or how it was found.
    fn touched(&mut self) -> Option<String> {
        let signalled = std::fs::read_to_string(&self.signals).unwrap_or_default();
        match self.child.try_wait().unwrap() {
            Some(status) => Some(format!("pid {} ended: {status}", self.pid())),
            None if !signalled.is_empty() => Some(format!("pid {} got {signalled:?}", self.pid())),
            None => None,
        }
    }

    fn kill(&mut self) {
        // SAFETY: signalling the group of a process this test started.
        unsafe { libc::kill(-(self.pid() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Lookalike {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A pid that runs nothing on this machine: a child's, once it is reaped.
fn absent_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    let pid = child.id();
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    let exists = unsafe { libc::kill(pid as i32, 0) } == 0;
    assert!(!exists, "pid {pid} was reused at once");
    pid
}

/// A task claimed on `ELSEWHERE` at `started` (an hour ago), over its one-minute
/// runtime, with a lease good until an hour from now; its worker's pid is what `worker`
/// starts with the task's worker environment.
fn foreign_run(b: &SharedBoard, title: &str, worker: impl FnOnce(&TaskId, RunId) -> u32) -> (TaskId, RunId) {
    let started = board_home::now() - 3600;
    let task = NewTask {
        max_runtime_seconds: Some(60),
        ..NewTask::titled(title)
    };
    let id = b.store.create(&task, started).unwrap().id;
    let claim = b.store.claim(&id, 7200, started).unwrap();
    let pid = worker(&id, claim.run_id);
    let set = Request::SetWorker {
        run_id: claim.run_id,
        claim_lock: claim.claim_lock,
        pid: i64::from(pid),
        host: ELSEWHERE.to_owned(),
    };
    b.store.transition(&id, &set, started).unwrap();
    (id, claim.run_id)
}

fn worker_env(id: &TaskId, run: RunId) -> Vec<(&'static str, String)> {
    vec![
        ("KANBAN_TASK", id.to_string()),
        ("KANBAN_RUN_ID", run.to_string()),
    ]
}

fn run_row(b: &SharedBoard, id: &TaskId, run: RunId) -> Run {
    let runs = b.store.runs(id).unwrap();
    runs.into_iter().find(|r| r.id == run).expect("the run")
}

/// How the runs stand, one line each: open or how they ended, and their tasks' events.
fn runs_as_seen(b: &SharedBoard, runs: &[(TaskId, RunId)]) -> Vec<String> {
    runs.iter()
        .map(|(id, run)| {
            let title = b.store.get(id).unwrap().title;
            let row = run_row(b, id, *run);
            let filter = EventFilter {
                task_id: Some(id.clone()),
                ..EventFilter::default()
            };
            let kinds: Vec<String> = b
                .store
                .events(&filter)
                .unwrap()
                .into_iter()
                .map(|e| e.kind)
                .collect();
            format!("{title} ({id}): outcome {:?}, events {kinds:?}", row.outcome)
        })
        .collect()
}

/// What was done to the test's processes; empty when nothing was.
fn touched(lookalikes: &mut [&mut Lookalike]) -> Vec<String> {
    lookalikes.iter_mut().filter_map(|l| l.touched()).collect()
}

#[test]
fn another_hosts_workers_are_never_signalled_adopted_or_ended_early_by_pid() {
    let shape = Shape {
        password: None,
        gateways: 1,
        max_spawn: 0,
        claim_ttl_seconds: 30,
        worker: "true",
        apart: false,
        extra: "",
        worker_extra: "",
    };
    let mut b = SharedBoard::new(&shape);
    let dir = b.dir.path().to_path_buf();
    let mut named = None;
    let mut goes = None;
    let mut unnamed = Lookalike::start(&dir, "unnamed", &[]);
    let lookalike = |slot: &mut Option<Lookalike>, name: &str, id: &TaskId, run: RunId| {
        let started = Lookalike::start(&dir, name, &worker_env(id, run));
        let pid = started.pid();
        *slot = Some(started);
        pid
    };
    let runs = [
        // Alive throughout, its environment naming its run as a worker's does.
        foreign_run(&b, "named, stays", |id, run| {
            lookalike(&mut named, "named", id, run)
        }),
        // The same, until the test ends it.
        foreign_run(&b, "named, goes", |id, run| lookalike(&mut goes, "goes", id, run)),
        // A live pid that does not run the run.
        foreign_run(&b, "unnamed", |_, _| unnamed.pid()),
        // A pid that runs nothing here, which a check by pid would call crashed.
        foreign_run(&b, "absent", |_, _| absent_pid()),
    ];
    let (mut named, mut goes) = (named.unwrap(), goes.unwrap());
    let open = runs_as_seen(&b, &runs);
    b.start(0);
    b.prove_ticks(4);
    let mut all = [&mut named, &mut goes, &mut unnamed];
    assert_eq!(
        touched(&mut all),
        Vec::<String>::new(),
        "another host's pid was signalled"
    );
    assert_eq!(runs_as_seen(&b, &runs), open, "another host's live run was ended");

    // Had the gateway adopted it, a worker gone would be let go and its run reclaimed.
    goes.kill();
    b.prove_ticks(3);
    assert_eq!(runs_as_seen(&b, &runs), open, "another host's worker was adopted");
    let mut living = [&mut named, &mut unnamed];
    assert_eq!(
        touched(&mut living),
        Vec::<String>::new(),
        "another host's pid was signalled"
    );

    // The leases lapse, as a last heartbeat long ago leaves them: every run ends stale.
    let long_ago = board_home::now() - 600;
    for (id, run) in &runs {
        assert!(b.store.heartbeat(id, *run, 1, None, long_ago).unwrap());
    }
    b.wait_for("the lapsed runs to end", || {
        runs.iter()
            .all(|(id, run)| run_row(&b, id, *run).ended_at.is_some())
    });
    b.prove_ticks(2);
    for (id, run) in &runs {
        let row = run_row(&b, id, *run);
        assert_eq!(row.outcome, Some(Outcome::Stale), "{id}: {row:?}");
    }
    assert_eq!(
        touched(&mut living),
        Vec::<String>::new(),
        "a lapsed run's pid was signalled"
    );
    assert!(b.alive(0), "the gateway died:\n{}", b.gateway_log(0));
}
