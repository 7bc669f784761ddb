//! What the end-to-end and reliability suites share: a home driven through the `kanban`
//! binary with a real gateway process and a fake model (replies chosen by card title,
//! probes to count ticks), and the checks the reliability suites end with: the
//! invariants of docs/board.md#invariants plus whole decompositions, events with their state changes
//! and one open run per task, all read from a read-only snapshot.
//!
//! The gateway's stdout and stderr go beside the home (not in it), so a scan of the home
//! sees only what the product wrote there.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use board_core::{BoardReads, BoardSnapshot, BoardStats, Status, Task, TaskId};
use board_sqlite::SqliteStore;
use fake_llm::{FakeLlm, RecordedRequest, Reply, Settings};

pub const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");
pub const WAIT: Duration = Duration::from_secs(60);

/// A single-task reply: what every card without a scripted reply (probes) gets.
pub const SINGLE: &str = r#"{"fanout": false, "rationale": "one step", "title": "probe done", "body": "nothing", "assignee": "idle"}"#;

pub type Replies = Arc<Mutex<HashMap<String, Reply>>>;

/// The `Title: ` line of a decomposer request.
pub fn title_of(request: &RecordedRequest) -> Option<String> {
    let messages = request.json()?.get("messages")?.as_array()?;
    messages.iter().find_map(|m| {
        let content = m.get("content")?.as_str()?;
        content
            .lines()
            .find_map(|l| l.strip_prefix("Title: "))
            .map(str::to_owned)
    })
}

/// `kanban --home HOME ARGS...` with none of the caller's board or worker variables.
pub fn kanban_at(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(KANBAN);
    cmd.arg("--home")
        .arg(home)
        .args(args)
        .env_remove("KANBAN_HOME")
        .env_remove("KANBAN_BOARD")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .env_remove("KANBAN_DATABASE_URL");
    cmd
}

/// Polls `done` every 20 ms until it holds; panics after `limit` with `what`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub struct GatewayBoard {
    pub dir: tempfile::TempDir,
    pub fake: FakeLlm,
    pub replies: Replies,
    pub gateway: Option<Child>,
    /// Extra environment for the gateway (and the CLI).
    pub env: Vec<(String, String)>,
    pub probes: usize,
    pub mounted: bool,
}

/// How a board is set up: the `model:` section's extra lines, `kanban:` extras, profiles.
pub struct Setup<'a> {
    pub fake: Settings,
    pub model_extra: &'a str,
    pub kanban_extra: &'a str,
    pub profiles: &'a str,
    pub max_spawn: usize,
    pub env: Vec<(String, String)>,
    /// Mount a tmpfs of this many KiB as the home before `init` (root only).
    pub tmpfs_home_kib: Option<u64>,
    /// `auxiliary.transient_retries` and the decomposer's `timeout` (seconds).
    pub transient_retries: u32,
    pub timeout_secs: u32,
    /// `kanban.dispatch_interval_seconds`.
    pub interval_seconds: f64,
    /// `kanban.auto_decompose_per_tick` and `auto_decompose_concurrency`.
    pub per_tick: usize,
    pub concurrency: usize,
    /// Extra lines of `auxiliary.kanban_decomposer` (four spaces in).
    pub decomposer_extra: &'a str,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            fake: Settings::default(),
            model_extra: "  api_key_env: KANBAN_REL_NO_KEY\n",
            kanban_extra: "",
            profiles: "",
            max_spawn: 0,
            env: Vec::new(),
            tmpfs_home_kib: None,
            transient_retries: 0,
            timeout_secs: 5,
            interval_seconds: 0.2,
            per_tick: 10,
            concurrency: 4,
            decomposer_extra: "",
        }
    }
}

impl GatewayBoard {
    pub fn new(setup: Setup<'_>) -> GatewayBoard {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeLlm::start_blocking(setup.fake).unwrap();
        let replies: Replies = Arc::default();
        let routes = replies.clone();
        fake.respond_with(move |request| {
            let title = title_of(request).unwrap_or_default();
            let routes = routes.lock().unwrap();
            if let Some(reply) = routes.get(&title).or_else(|| routes.get("")) {
                return reply.clone();
            }
            Reply::text(SINGLE)
        });
        let mut board = GatewayBoard {
            dir,
            fake,
            replies,
            gateway: None,
            env: setup.env,
            probes: 0,
            mounted: false,
        };
        if let Some(kib) = setup.tmpfs_home_kib {
            std::fs::create_dir(board.path()).unwrap();
            let status = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={kib}k,mode=0700"), "tmpfs"])
                .arg(board.path())
                .status()
                .unwrap();
            assert!(status.success(), "mount a tmpfs home");
            board.mounted = true;
        }
        // `init` creates the home and its config template with the product's own
        // permissions; the test's config then overwrites the template's contents.
        let init = board.kanban(&["init"]);
        assert!(init.status.success(), "{init:?}");
        let config = format!(
            "model:\n  base_url: {url}\n  default: fake\n{model_extra}\
             auxiliary:\n  transient_retries: {retries}\n  kanban_decomposer:\n    timeout: {timeout}\n{decomposer_extra}\
             kanban:\n  dispatch_interval_seconds: {interval}\n  max_spawn: {max_spawn}\n  auto_decompose: true\n  \
             auto_decompose_per_tick: {per_tick}\n  auto_decompose_concurrency: {concurrency}\n  default_assignee: idle\n{kanban_extra}\
             profiles:\n  idle:\n    description: never spawned\n{profiles}",
            url = board.fake.base_url(),
            model_extra = setup.model_extra,
            max_spawn = setup.max_spawn,
            kanban_extra = setup.kanban_extra,
            profiles = setup.profiles,
            retries = setup.transient_retries,
            timeout = setup.timeout_secs,
            interval = setup.interval_seconds,
            per_tick = setup.per_tick,
            concurrency = setup.concurrency,
            decomposer_extra = setup.decomposer_extra,
        );
        std::fs::write(board.path().join("config.yaml"), config).unwrap();
        board
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn db_path(&self) -> PathBuf {
        self.path().join("kanban.db")
    }

    pub fn reply(&self, title: &str, reply: Reply) {
        self.replies.lock().unwrap().insert(title.to_owned(), reply);
    }

    /// Every card without a scripted reply gets `reply` (`None`: the single-task reply
    /// again), as a model that is down, then healthy.
    pub fn default_reply(&self, reply: Option<Reply>) {
        let mut replies = self.replies.lock().unwrap();
        match reply {
            Some(reply) => replies.insert(String::new(), reply),
            None => replies.remove(""),
        };
    }

    /// The gateway's tick count, from `gateway.json` (0 before its first tick).
    pub fn ticks(&self) -> u64 {
        self.status_count("ticks")
    }

    fn status_count(&self, key: &str) -> u64 {
        std::fs::read_to_string(self.path().join("gateway.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|status| status[key].as_u64())
            .unwrap_or(0)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(KANBAN);
        cmd.arg("--home")
            .arg(self.path())
            .args(args)
            .env_remove("KANBAN_HOME")
            .env_remove("KANBAN_TASK")
            .env_remove("KANBAN_RUN_ID")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    pub fn kanban(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn kanban_ok(&self, args: &[&str]) -> String {
        let out = self.kanban(args);
        assert!(
            out.status.success(),
            "kanban {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn create(&self, args: &[&str]) -> TaskId {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = self.kanban_ok(&all);
        let task: serde_json::Value = serde_json::from_str(&out).unwrap();
        task["id"].as_str().unwrap().parse().unwrap()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("gateway.stderr")
    }

    /// Where the gateway's stdout goes, beside its log.
    pub fn stdout_path(&self) -> PathBuf {
        self.dir.path().join("gateway.stdout")
    }

    /// Starts `kanban gateway run` and waits for its first tick (`gateway.json`).
    pub fn start_gateway(&mut self) {
        self.start_gateway_with(|_| {});
    }

    /// [`GatewayBoard::start_gateway`], with `prepare` given the command before it starts.
    pub fn start_gateway_with(&mut self, prepare: impl FnOnce(&mut Command)) {
        let _ = std::fs::remove_file(self.path().join("gateway.json"));
        let append = |path: PathBuf| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap()
        };
        let mut command = self.command(&["gateway", "run"]);
        command
            .stdin(Stdio::null())
            .stdout(append(self.stdout_path()))
            .stderr(append(self.log_path()));
        prepare(&mut command);
        self.gateway = Some(command.spawn().unwrap());
        self.wait_for("the gateway's first tick", || {
            self.path().join("gateway.json").exists()
        });
    }

    /// SIGKILLs the gateway (workers live on in their own groups).
    pub fn kill_gateway(&mut self) {
        if let Some(mut gateway) = self.gateway.take() {
            let _ = gateway.kill();
            let _ = gateway.wait();
        }
    }

    /// SIGKILLs a gateway that must still be running: one that already exited would
    /// make the kill a no-op and the test a lie.
    pub fn sigkill_running_gateway(&mut self) {
        let mut gateway = self.gateway.take().expect("a gateway was started");
        let exited = gateway.try_wait().expect("poll the gateway");
        assert!(
            exited.is_none(),
            "the gateway exited by itself ({exited:?}) before the kill:\n{}",
            self.gateway_log()
        );
        gateway.kill().expect("SIGKILL the gateway");
        gateway.wait().expect("reap the gateway");
    }

    pub fn gateway_alive(&mut self) -> bool {
        self.gateway
            .as_mut()
            .is_some_and(|g| g.try_wait().unwrap().is_none())
    }

    pub fn gateway_log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn db(&self) -> SqliteStore {
        SqliteStore::open_read_only(self.db_path()).unwrap()
    }

    pub fn snapshot(&self) -> BoardSnapshot {
        self.db().snapshot().unwrap()
    }

    pub fn task(&self, id: &TaskId) -> Task {
        self.db().get(id).unwrap()
    }

    /// The kinds of a task's events, oldest first.
    pub fn kinds(&self, id: &TaskId) -> Vec<String> {
        let filter = board_core::EventFilter {
            task_id: Some(id.clone()),
            ..board_core::EventFilter::default()
        };
        self.db()
            .events(&filter)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }

    /// Model requests about one card.
    pub fn bills(&self, id: &TaskId) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| r.task_id.as_deref() == Some(id.as_str()))
            .count()
    }

    /// The children a decomposition of `root` created.
    pub fn children(&self, root: &TaskId) -> Vec<TaskId> {
        self.snapshot()
            .links
            .iter()
            .filter(|l| &l.child_id == root)
            .map(|l| l.parent_id.clone())
            .collect()
    }

    pub fn wait_for(&self, what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > WAIT {
                panic!(
                    "timed out waiting for {what}\ngateway log:\n{}",
                    self.gateway_log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Proves `count` more ticks: each probe must leave triage before the next is made.
    pub fn prove_ticks(&mut self, count: usize) {
        for _ in 0..count {
            self.probes += 1;
            let probe = self.create(&[&format!("probe {}", self.probes), "--triage"]);
            self.wait_for("a probe to leave triage", || {
                self.task(&probe).status != Status::Triage
            });
        }
    }

    /// Stops every worker the board's runs name (each in its own process group).
    pub fn kill_workers(&self) {
        let Ok(store) = SqliteStore::open_read_only(self.db_path()) else {
            return;
        };
        if let Ok(snapshot) = store.snapshot() {
            for run in snapshot.runs {
                if let Some(pid) = run.worker_pid.filter(|&p| p > 1) {
                    // SAFETY: signalling a worker group this test's gateway started.
                    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                }
            }
        }
    }
}

impl Drop for GatewayBoard {
    fn drop(&mut self) {
        self.kill_gateway();
        self.kill_workers();
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
    }
}

/// A profile whose command is `sh -c SCRIPT`, with `kanban` meaning this build's binary.
pub fn worker_profile(name: &str, script: &str) -> String {
    let script = script.replace("kanban ", &format!("{KANBAN} "));
    format!("  {name}:\n    description: test worker\n    command: [\"sh\", \"-c\", {script:?}]\n")
}

/// Every invariant of docs/board.md#invariants on one snapshot (two open runs among them), plus what a
/// crash must never leave: a half-written decomposition, an event without its state
/// change. `check_board_mutations` proves each rule catches what it is for.
pub fn check_board(board: &BoardSnapshot) -> Result<(), String> {
    board_core::check_invariants(board).map_err(|v| v.to_string())?;
    let tasks: BTreeMap<&TaskId, &Task> = board.tasks.iter().map(|t| (&t.id, t)).collect();
    let links: BTreeSet<(&TaskId, &TaskId)> =
        board.links.iter().map(|l| (&l.parent_id, &l.child_id)).collect();
    let mut events_of: BTreeMap<&TaskId, Vec<&board_core::Event>> = BTreeMap::new();
    for e in &board.events {
        events_of.entry(&e.task_id).or_default().push(e);
    }
    // Every decomposition is whole: its children exist, each links the root, each was
    // created from it, in the same transaction as the `decomposed` event.
    let mut decomposed_children: BTreeMap<&TaskId, &TaskId> = BTreeMap::new();
    for e in board.events.iter().filter(|e| e.kind == "decomposed") {
        let root = &e.task_id;
        let ids: Vec<TaskId> = serde_json::from_value(e.payload["child_ids"].clone())
            .map_err(|err| format!("decomposed event {}: {err}", e.id))?;
        for child in &ids {
            if !tasks.contains_key(child) {
                return Err(format!("{root} decomposed into {child}, which does not exist"));
            }
            if !links.contains(&(child, root)) {
                return Err(format!("{root} decomposed into {child} without the link"));
            }
        }
        for child in ids.iter() {
            if let Some((child, _)) = tasks.get_key_value(child) {
                decomposed_children.insert(child, root);
            }
        }
    }
    for task in &board.tasks {
        let events = events_of.get(&task.id).map(Vec::as_slice).unwrap_or(&[]);
        let Some(first) = events.first() else {
            return Err(format!("{} has no event at all", task.id));
        };
        if first.kind != "created" {
            return Err(format!("{}'s first event is {}", task.id, first.kind));
        }
        let from = first.payload.get("decomposed_from").and_then(|v| v.as_str());
        if task.created_by.as_deref() == Some("decomposer") || from.is_some() {
            match decomposed_children.get(&task.id) {
                Some(root) if Some(root.as_str()) == from => {}
                _ => {
                    return Err(format!(
                    "{} was created by a decomposition of {from:?} that has no `decomposed` event naming it",
                    task.id
                ))
                }
            }
            for parent in first.payload["parents"].as_array().into_iter().flatten() {
                let parent: TaskId = serde_json::from_value(parent.clone()).map_err(|e| e.to_string())?;
                if !links.contains(&(&parent, &task.id)) {
                    return Err(format!("{} lacks its sibling link from {parent}", task.id));
                }
            }
        }
        // A task out of triage that was decomposed or specified says so in an event.
        let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
        if count("decomposed") > 1 {
            return Err(format!("{} was decomposed twice", task.id));
        }
        if task.status == Status::Done && count("completed") == 0 {
            return Err(format!("{} is done without a `completed` event", task.id));
        }
        if task.status == Status::Archived && count("archived") == 0 {
            return Err(format!("{} is archived without an `archived` event", task.id));
        }
    }
    // Every run is opened by a `claimed` event naming it, and every closed run by an
    // event naming it; every event naming a run names one that exists.
    let run_ids: BTreeSet<i64> = board.runs.iter().map(|r| r.id).collect();
    for e in &board.events {
        if let Some(run) = e.run_id {
            if !run_ids.contains(&run) {
                return Err(format!("event {} ({}) names missing run {run}", e.id, e.kind));
            }
        }
        if e.kind == "claimed" && e.run_id.is_none() {
            return Err(format!("claimed event {} names no run", e.id));
        }
    }
    for run in &board.runs {
        let named: Vec<&str> = events_of
            .get(&run.task_id)
            .into_iter()
            .flatten()
            .filter(|e| e.run_id == Some(run.id))
            .map(|e| e.kind.as_str())
            .collect();
        // A replayed zero-length run (complete without a claim) has no `claimed` event.
        if !named.contains(&"claimed") && !named.contains(&"completed") {
            return Err(format!(
                "run {} of {} has no `claimed` event",
                run.id, run.task_id
            ));
        }
        let non_closing = ["heartbeat", "claimed", "claim_extended", "reclaim_deferred"];
        if !run.is_open() && named.iter().all(|k| non_closing.contains(k)) {
            return Err(format!(
                "run {} of {} ended ({:?}) without an event: {named:?}",
                run.id, run.task_id, run.outcome
            ));
        }
    }
    Ok(())
}

/// The files under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if !entry.file_type().is_ok_and(|t| t.is_socket()) {
                // A socket (the gateway's `gateway.wake`) holds no bytes to read.
                out.push(path);
            }
        }
    }
    out
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
