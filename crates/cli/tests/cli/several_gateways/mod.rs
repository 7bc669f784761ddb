//! Several gateways on one PostgreSQL board (docs/gateway.md#several-gateways-on-one-board):
//! gateway processes with separate homes and host ids, real worker processes reporting
//! through `kanban`, one fake model. Every task is done once, every triage card billed
//! once, even when every gateway tries it at once (`billing`); a host that dies is taken over after its leases lapse; a gateway whose database
//! sessions are terminated carries on with its workers; another host's workers are
//! never touched by pid (`host_scope`).
//!
//! The server is `KANBAN_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`);
//! each test's board is a fresh schema, dropped at its end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use board_core::{
    BoardReads, BoardSnapshot, BoardStats, BoardWrites, DispatchQueue, LlmLedger, NewTask, Outcome, Status,
    TaskId,
};
use board_postgres::PgStore;
use fake_llm::{FakeLlm, Reply, Settings};

use crate::gateway_board::{kanban_at, KANBAN};

use crate::host_rig::{self as rig, Host};
use crate::private_server::PrivateServer;
use crate::scratch_schema::{
    drop_schema, in_schema, open_board_at, server_url, tear_down, terminate_sessions,
};

mod apart;
mod apart_bench;
mod billing;
mod host_scope;

const WAIT: Duration = Duration::from_secs(120);

/// The model's reply to every card: one tightened task.
const ONE_STEP: &str = r#"{"fanout": false, "rationale": "one step", "title": "decomposed", "body": "do it", "assignee": "worker"}"#;

/// A board in a schema of its own, and the gateways sharing it.
struct SharedBoard {
    dir: tempfile::TempDir,
    schema: String,
    /// The URL the homes are configured with: the server's, its `search_path` the schema.
    url: String,
    store: PgStore,
    fake: FakeLlm,
    gateways: Vec<Option<Child>>,
    /// With `Shape::apart`, the host each gateway runs on (`crate::hosts::rig`).
    hosts: Vec<Host>,
    /// The board's own server, when it has one (dropped with the board, its schema too).
    server: Option<PrivateServer>,
}

/// What each gateway's config says beyond the shared lines.
struct Shape {
    /// A password in the homes' `database_url` (the test server trusts, so any works).
    password: Option<&'static str>,
    gateways: usize,
    max_spawn: usize,
    claim_ttl_seconds: i64,
    worker: &'static str,
    /// Each gateway on a host of its own (network and PID namespaces), not side by side.
    apart: bool,
    /// Config lines under `kanban:` beyond the shared ones.
    extra: &'static str,
    /// Config lines of the worker profile beyond its command (four spaces in).
    worker_extra: &'static str,
}

impl SharedBoard {
    fn new(shape: &Shape) -> SharedBoard {
        SharedBoard::on(shape, None)
    }

    /// A board on `server`, or on the test server.
    fn on(shape: &Shape, server: Option<PrivateServer>) -> SharedBoard {
        let base = server.as_ref().map_or_else(server_url, PrivateServer::url);
        let (store, schema) = open_board_at(&base, "kanban_gateways");
        let mut url = in_schema(&base, &schema);
        if let Some(password) = shape.password {
            let (scheme, rest) = url.split_once("://").expect("a URL");
            let (user, hosts) = rest.split_once('@').expect("a user in the test server's URL");
            let user = user.split(':').next().unwrap_or(user);
            url = format!("{scheme}://{user}:{password}@{hosts}");
        }
        let fake = FakeLlm::start_blocking(Settings::default()).unwrap();
        fake.respond_with(|_| Reply::text(ONE_STEP));
        if shape.apart {
            rig::require_root();
        }
        let mut board = SharedBoard {
            dir: tempfile::tempdir().unwrap(),
            schema,
            url,
            store,
            fake,
            gateways: Vec::new(),
            hosts: Vec::new(),
            server,
        };
        for n in 0..shape.gateways {
            board.make_home(n, shape);
        }
        board
    }

    fn home(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("home-{n}"))
    }

    fn log(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("gateway-{n}.log"))
    }

    fn gateway_log(&self, n: usize) -> String {
        std::fs::read_to_string(self.log(n)).unwrap_or_default()
    }

    fn kanban(&self, n: usize, args: &[&str]) -> Command {
        kanban_at(&self.home(n), args)
    }

    /// Writes home `n`. Apart, it starts the home's host first and names the board and
    /// the model as that host reaches them, through its own link.
    fn make_home(&mut self, n: usize, shape: &Shape) {
        let (url, model, insecure) = if shape.apart {
            let mut host = Host::start(&format!("host-{n}"));
            let server = rig::server_address(&self.url);
            let database = host.forward(server);
            let model = host.forward(self.fake.addr());
            let url = self.url.replacen(&server.to_string(), &database.to_string(), 1);
            let base = self.fake.base_url();
            let base = base.replacen(&self.fake.addr().to_string(), &model.to_string(), 1);
            self.hosts.push(host);
            (url, base, "  allow_insecure_http: true\n")
        } else {
            (self.url.clone(), self.fake.base_url(), "")
        };
        let init = self.kanban(n, &["init"]).output().unwrap();
        assert!(init.status.success(), "{init:?}");
        let worker = shape.worker.replace("kanban ", &format!("{KANBAN} "));
        let config = format!(
            "database_url: {url}\ngateway:\n  host_id: host-{n}\n\
             model:\n  base_url: {model}\n  default: fake\n  api_key_env: KANBAN_REL_NO_KEY\n{insecure}\
             auxiliary:\n  transient_retries: 0\n  kanban_decomposer:\n    timeout: 5\n\
             kanban:\n  dispatch_interval_seconds: 0.2\n  max_spawn: {max_spawn}\n  auto_decompose: true\n  \
             auto_decompose_per_tick: 10\n  auto_decompose_concurrency: 4\n  default_assignee: worker\n  \
             claim_ttl_seconds: {ttl}\n  failure_limit: 5\n{extra}\
             profiles:\n  worker:\n    description: test worker\n    command: [\"sh\", \"-c\", {worker:?}]\n{worker_extra}",
            worker_extra = shape.worker_extra,
            max_spawn = shape.max_spawn,
            ttl = shape.claim_ttl_seconds,
            extra = shape.extra,
        );
        std::fs::write(self.home(n).join("config.yaml"), config).unwrap();
    }

    /// Starts the gateway of home `n` and waits for its first tick.
    fn start(&mut self, n: usize) {
        self.launch(n);
        let status = self.home(n).join("gateway.json");
        self.wait_for(&format!("gateway {n}'s first tick"), || status.exists());
    }

    /// Starts the gateway of home `n`.
    fn launch(&mut self, n: usize) {
        let _ = std::fs::remove_file(self.home(n).join("gateway.json"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(n))
            .unwrap();
        let mut command = match self.hosts.get(n) {
            Some(host) => {
                let mut inside = host.command(KANBAN);
                inside
                    .arg("--home")
                    .arg(self.home(n))
                    .args(["gateway", "run"])
                    .env_remove("KANBAN_HOME")
                    .env_remove("KANBAN_TASK")
                    .env_remove("KANBAN_RUN_ID")
                    .env_remove("KANBAN_DATABASE_URL");
                inside
            }
            None => self.kanban(n, &["gateway", "run"]),
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        if self.gateways.len() <= n {
            self.gateways.resize_with(n + 1, || None);
        }
        self.gateways[n] = Some(child);
    }

    fn pid(&self, n: usize) -> u32 {
        self.gateways[n].as_ref().expect("started").id()
    }

    fn alive(&mut self, n: usize) -> bool {
        self.gateways[n]
            .as_mut()
            .is_some_and(|g| g.try_wait().unwrap().is_none())
    }

    fn snapshot(&self) -> BoardSnapshot {
        self.store.snapshot().unwrap()
    }

    /// Polls `done` until it holds; on timeout, fails with every gateway's log.
    fn wait_for(&self, what: &str, mut done: impl FnMut() -> bool) {
        let start = std::time::Instant::now();
        while !done() {
            if start.elapsed() > WAIT {
                let logs: Vec<String> = (0..self.gateways.len()).map(|n| self.gateway_log(n)).collect();
                panic!("timed out waiting for {what}\n{}", logs.join("\n---\n"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Proves `count` more ticks from outside: a probe card goes into triage, and the
    /// next one only once a gateway has moved it out, which only a tick starts.
    fn prove_ticks(&self, count: usize) {
        for i in 0..count {
            let probe = NewTask {
                triage: true,
                ..NewTask::titled(format!("probe {i}"))
            };
            let id = self.store.create(&probe, board_home::now()).unwrap().id;
            self.wait_for("a probe to leave triage", || {
                self.store.get(&id).unwrap().status != Status::Triage
            });
        }
    }

    fn all_done(&self, tasks: usize) -> bool {
        let done = self
            .store
            .list(&board_core::TaskFilter {
                status: Some(Status::Done),
                ..Default::default()
            })
            .unwrap();
        done.len() == tasks && self.store.running().unwrap().is_empty()
    }

    /// SIGKILLs the process group of every open run's worker on `host`.
    fn kill_workers_of(&self, host: &str) -> usize {
        let mut killed = 0;
        for task in self.store.running().unwrap() {
            if task.worker_host() == Some(host) {
                if let Some(pid) = task.worker_pid().filter(|p| *p > 1) {
                    // SAFETY: signalling a worker group a test gateway started.
                    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                    killed += 1;
                }
            }
        }
        killed
    }
}

impl Drop for SharedBoard {
    fn drop(&mut self) {
        // Hosts first: every process of theirs dies with them. Their workers' pids are
        // numbers of their own namespaces, never signalled from here.
        let apart = !self.hosts.is_empty();
        self.hosts.clear();
        for gateway in self.gateways.iter_mut().flatten() {
            let _ = gateway.kill();
            let _ = gateway.wait();
        }
        if self.server.is_some() {
            // The server goes, and its board with it.
        } else if apart {
            drop_schema(&self.schema);
        } else {
            tear_down(&self.store, &self.schema);
        }
    }
}

/// Creates `ready` ready tasks and `triage` triage cards; returns the cards.
fn seed(board: &SharedBoard, ready: usize, triage: usize) -> Vec<TaskId> {
    for i in 0..ready {
        board
            .store
            .create(&NewTask::titled(format!("task {i}")), board_home::now())
            .unwrap();
    }
    (0..triage)
        .map(|i| {
            let card = NewTask {
                triage: true,
                ..NewTask::titled(format!("card {i}"))
            };
            board.store.create(&card, board_home::now()).unwrap().id
        })
        .collect()
}

/// Every task done with exactly one completed run, no run left open, the invariants
/// (one open run per task among them) whole; the completed runs by host.
/// Every card of `cards` was sent to the model exactly once, with one ledger row each.
pub(crate) fn billed_once(fake: &FakeLlm, ledger: &dyn LlmLedger, cards: &[TaskId]) {
    let mut bills: BTreeMap<String, usize> = BTreeMap::new();
    for request in fake.requests() {
        *bills
            .entry(request.task_id.clone().unwrap_or_default())
            .or_default() += 1;
    }
    for card in cards {
        assert_eq!(
            bills.get(card.as_str()),
            Some(&1),
            "card {card} billed {:?} times",
            bills.get(card.as_str())
        );
    }
    assert_eq!(
        ledger.llm_calls(None).unwrap().len(),
        cards.len(),
        "one ledger row per card"
    );
}

pub(crate) fn done_once(snapshot: &BoardSnapshot) -> BTreeMap<String, usize> {
    board_core::check_invariants(snapshot).unwrap();
    let mut completed: BTreeMap<&TaskId, usize> = BTreeMap::new();
    let mut by_host: BTreeMap<String, usize> = BTreeMap::new();
    for run in &snapshot.runs {
        assert!(
            run.ended_at.is_some(),
            "run {} of {} is still open",
            run.id,
            run.task_id
        );
        if run.outcome == Some(Outcome::Completed) {
            *completed.entry(&run.task_id).or_default() += 1;
            let host = run.worker_host.clone().unwrap_or_else(|| "(none)".into());
            *by_host.entry(host).or_default() += 1;
        }
    }
    for task in &snapshot.tasks {
        assert_eq!(task.status, Status::Done, "{} is {}", task.id, task.status);
        assert_eq!(
            completed.get(&task.id),
            Some(&1),
            "{} completed {:?} times",
            task.id,
            completed.get(&task.id)
        );
    }
    by_host
}

const QUICK: &str = "kanban complete --result done";

#[test]
fn three_gateways_do_every_task_once_and_bill_every_card_once() {
    let shape = Shape {
        password: None,
        gateways: 3,
        max_spawn: 4,
        claim_ttl_seconds: 30,
        worker: QUICK,
        apart: false,
        extra: "",
        worker_extra: "",
    };
    steady_state(&shape);
}

/// Three gateways of `shape` and 300 tasks, 30 of them triage cards: every task done
/// once, every gateway ran some, every card billed once, no gateway died. The board as
/// it ended.
fn steady_state(shape: &Shape) -> BoardSnapshot {
    let mut b = SharedBoard::new(shape);
    let cards = seed(&b, 270, 30);
    for n in 0..3 {
        b.start(n);
    }
    b.wait_for("300 tasks done", || b.all_done(300));
    let snapshot = b.snapshot();
    assert_eq!(snapshot.tasks.len(), 300);
    let by_host = done_once(&snapshot);
    eprintln!("completed runs by host: {by_host:?}");
    for n in 0..3 {
        assert!(
            by_host.get(&format!("host-{n}")).is_some_and(|c| *c > 0),
            "host-{n} ran nothing: {by_host:?}"
        );
    }
    billed_once(&b.fake, &b.store, &cards);
    for n in 0..3 {
        assert!(b.alive(n), "gateway {n} died:\n{}", b.gateway_log(n));
        assert!(!b.gateway_log(n).contains("panicked"), "{}", b.gateway_log(n));
    }
    snapshot
}

#[test]
fn a_dead_hosts_runs_are_reclaimed_after_their_lease_and_nothing_is_done_twice() {
    let shape = Shape {
        password: None,
        gateways: 3,
        max_spawn: 3,
        claim_ttl_seconds: 3,
        worker: "sleep 1; kanban complete --result done",
        apart: false,
        extra: "",
        worker_extra: "",
    };
    let mut b = SharedBoard::new(&shape);
    seed(&b, 40, 0);
    for n in 0..3 {
        b.start(n);
    }
    b.wait_for("host-0 to run workers", || {
        b.store
            .running()
            .unwrap()
            .iter()
            .filter(|t| t.worker_host() == Some("host-0") && t.worker_pid().is_some())
            .count()
            >= 2
    });
    // The host dies: its gateway and its workers at once.
    let gateway = b.gateways[0].as_mut().unwrap();
    gateway.kill().unwrap();
    gateway.wait().unwrap();
    let orphaned: BTreeSet<TaskId> = b
        .store
        .running()
        .unwrap()
        .into_iter()
        .filter(|t| t.worker_host() == Some("host-0"))
        .map(|t| t.id)
        .collect();
    assert!(b.kill_workers_of("host-0") >= 1);
    assert!(!orphaned.is_empty());
    b.wait_for("every task done by the survivors", || b.all_done(40));
    let snapshot = b.snapshot();
    done_once(&snapshot);
    for id in &orphaned {
        let runs: Vec<_> = snapshot.runs.iter().filter(|r| &r.task_id == id).collect();
        let dead = runs
            .iter()
            .find(|r| r.worker_host.as_deref() == Some("host-0"))
            .expect("the dead host's run");
        assert_eq!(dead.outcome, Some(Outcome::Stale), "{id}: {runs:?}");
        let redone = runs
            .iter()
            .find(|r| r.outcome == Some(Outcome::Completed))
            .unwrap();
        assert_ne!(
            redone.worker_host.as_deref(),
            Some("host-0"),
            "{id} was finished by a survivor"
        );
    }
    for n in 1..3 {
        assert!(b.alive(n), "gateway {n} died:\n{}", b.gateway_log(n));
    }
}

#[test]
fn a_gateway_whose_sessions_are_terminated_reconnects_and_keeps_its_workers() {
    let shape = Shape {
        password: None,
        gateways: 1,
        max_spawn: 4,
        claim_ttl_seconds: 30,
        worker: "sleep 1; kanban complete --result done",
        apart: false,
        extra: "",
        worker_extra: "",
    };
    let mut b = SharedBoard::new(&shape);
    seed(&b, 12, 0);
    b.start(0);
    b.wait_for("workers running", || {
        b.store
            .running()
            .unwrap()
            .iter()
            .filter(|t| t.worker_pid().is_some())
            .count()
            >= 2
    });
    let before: BTreeMap<TaskId, i64> = b
        .store
        .running()
        .unwrap()
        .into_iter()
        .filter_map(|t| Some((t.id.clone(), t.current_run_id()?)))
        .collect();
    let name = format!("kanban pid {}", b.pid(0));
    let ended = terminate_sessions(&name);
    assert!(ended >= 1, "the gateway held no session named {name:?}");
    b.wait_for("every task done", || b.all_done(12));
    let snapshot = b.snapshot();
    done_once(&snapshot);
    // The workers running when the sessions ended finished their own runs.
    for (task, run) in &before {
        let run = snapshot.runs.iter().find(|r| r.id == *run).unwrap();
        assert_eq!(run.outcome, Some(Outcome::Completed), "{task}: {run:?}");
    }
    assert!(b.alive(0), "the gateway died:\n{}", b.gateway_log(0));
    let log = b.gateway_log(0);
    let lost = log
        .lines()
        .filter(|l| l.contains("database session was lost"))
        .count();
    assert_eq!(lost, 1, "one line for the lost sessions:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
}

const PASSWORD: &str = "pg-canary-3e9d51b7";

#[test]
fn the_database_password_never_leaves_the_config() {
    let shape = Shape {
        password: Some(PASSWORD),
        gateways: 1,
        max_spawn: 2,
        claim_ttl_seconds: 30,
        worker: "env > \"$KANBAN_WORKSPACE/env.txt\"; kanban complete --result dumped",
        apart: false,
        extra: "",
        worker_extra: "",
    };
    let mut b = SharedBoard::new(&shape);
    let tasks: Vec<TaskId> = (0..2)
        .map(|i| {
            b.store
                .create(&NewTask::titled(format!("dump {i}")), board_home::now())
                .unwrap()
                .id
        })
        .collect();
    b.start(0);
    b.wait_for("the dumpers to complete", || b.all_done(2));
    let mut printed = Vec::new();
    for args in [
        &["config", "check"][..],
        &["config", "check", "--json"],
        &["events", "--json"],
        &["runs", tasks[0].as_str(), "--json"],
        &["list", "--json"],
        &["stats", "--json"],
    ] {
        let out = b.kanban(0, args).output().unwrap();
        assert!(out.status.success(), "kanban {args:?}: {out:?}");
        printed.push((format!("{args:?}"), out));
    }
    let runs: serde_json::Value = serde_json::from_slice(&printed[3].1.stdout).unwrap();
    assert_eq!(
        runs[0]["worker_host"], "host-0",
        "a run's JSON names the host that started its worker: {runs}"
    );
    let shown = String::from_utf8_lossy(&printed[0].1.stdout).into_owned();
    assert!(
        shown.contains(":***@"),
        "config check shows the URL redacted: {shown}"
    );
    // A board that cannot be reached: the error names it, never with its password.
    let unreachable = format!("postgres://postgres:{PASSWORD}@127.0.0.1:1/test");
    let out = b
        .kanban(0, &["list"])
        .env("KANBAN_DATABASE_URL", &unreachable)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let error = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(error.contains("127.0.0.1:1") && error.contains("***"), "{error}");
    printed.push(("list on an unreachable board".into(), out));
    for (what, out) in &printed {
        for bytes in [&out.stdout, &out.stderr] {
            assert!(
                !String::from_utf8_lossy(bytes).contains(PASSWORD),
                "kanban {what} printed the password"
            );
        }
    }
    for task in &tasks {
        let dump = b.home(0).join("workspaces").join(task.as_str()).join("env.txt");
        let env = std::fs::read_to_string(dump).unwrap();
        assert!(
            !env.contains("DATABASE_URL"),
            "a worker reports through its channel and is given no database URL: {env}"
        );
        assert!(
            !env.contains(PASSWORD),
            "a worker's environment holds the password: {env}"
        );
    }
    let rows = serde_json::to_string(&(b.snapshot(), b.store.llm_calls(None).unwrap())).unwrap();
    assert!(!rows.contains(PASSWORD), "a row of the board holds the password");
    let log = b.gateway_log(0);
    assert!(
        log.contains("gateway started") && log.contains(":***@"),
        "a real log: {log}"
    );
    assert!(
        !log.contains(PASSWORD),
        "the gateway's log holds the password: {log}"
    );
    for file in crate::gateway_board::files_under(b.dir.path()) {
        if file == b.home(0).join("config.yaml") {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(PASSWORD),
            "{} holds the password",
            file.display()
        );
    }
}
