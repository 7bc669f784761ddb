//! `cargo xtask bench [--peer] [--only WORKLOAD,...]`: the performance harness (issue 6).
//!
//! Builds the release binaries and the workload examples once, then runs each workload
//! after a warm-up several times and prints a table (median, min, max, unit, the ratio
//! against its baseline, the goal and whether it is met) and writes
//! `target/bench/results.json` so two runs can be compared. Every baseline is measured
//! in the same invocation, on the same disk, as the figure it is compared with.
//!
//! The workloads live next to the code they exercise (`crates/board-sqlite/examples/
//! bench_store.rs`, `crates/board-postgres/examples/bench_store.rs`,
//! `crates/gateway/examples/bench_tick.rs`) and print one JSON line of figures each; xtask
//! only starts processes and reads what they print, so it depends on none of our crates.
//! `--only` runs some of them (`--only postgres`: the PostgreSQL rows, see
//! `postgres.rs`); `--peer` adds the same store and CLI workloads run against the
//! Python Hermes kanban (see `peer.rs`).

mod peer;
mod postgres;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Measured runs per workload, after one warm-up run that is discarded.
const RUNS: usize = 5;
/// Timed invocations per CLI verb, after `CLI_WARMUP` discarded ones.
const CLI_RUNS: usize = 20;
const CLI_WARMUP: usize = 3;
/// Gateway start-ups per footprint figure: memory varies little, and each busy start
/// spawns 100 workers.
const GATEWAY_RUNS: usize = 3;
/// Time cap of one store measurement, so a slow disk bounds the run instead of the count.
const STORE_SECONDS: &str = "1.0";
/// Board sizes for the tick workload; the largest also backs the CLI workload.
const BOARD_SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const BOARD_READY: usize = 1_000;
const BOARD_TRIAGE: usize = 100;
const TICKS_PER_RUN: usize = 20;
const BUSY_WORKERS: usize = 100;

/// The decomposition the fake model answers every triage card with.
const SPLIT_SCRIPT: &str = r#"{
  "default": {"kind": "text", "content_json": {"fanout": true, "rationale": "two steps",
    "tasks": [
      {"title": "First half", "body": "Done when the first half works.", "parents": []},
      {"title": "Second half", "body": "Done when the second half works.", "parents": [0]}
    ]}}
}"#;

/// Where the harness finds its programs and keeps its files.
pub(crate) struct Paths {
    pub(crate) release: PathBuf,
    pub(crate) examples: PathBuf,
    /// `target/bench`: results, cached boards, the peer's virtualenv.
    pub(crate) bench: PathBuf,
    /// `target/bench/work`: scratch homes and boards, emptied at every start.
    pub(crate) work: PathBuf,
}

impl Paths {
    fn new(root: &Path) -> Paths {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let target = if target.is_relative() {
            root.join(target)
        } else {
            target
        };
        let bench = target.join("bench");
        Paths {
            release: target.join("release"),
            examples: target.join("release").join("examples"),
            work: bench.join("work"),
            bench,
        }
    }

    pub(crate) fn kanban(&self) -> PathBuf {
        self.release.join("kanban")
    }

    fn board(&self, size: usize) -> PathBuf {
        self.bench.join("boards").join(format!("board-{size}.db"))
    }
}

/// Whether a goal is met, and how it reads in the table.
#[derive(Clone, Debug)]
pub(crate) struct Goal {
    pub(crate) text: String,
    pub(crate) pass: bool,
}

/// One line of the table.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) unit: String,
    pub(crate) samples: Vec<f64>,
    /// The ratio against the baseline and what the baseline is.
    pub(crate) ratio: Option<(f64, String)>,
    pub(crate) goals: Vec<Goal>,
}

impl Row {
    pub(crate) fn new(id: &str, label: &str, unit: &str, samples: Vec<f64>) -> Row {
        Row {
            id: id.to_owned(),
            label: label.to_owned(),
            unit: unit.to_owned(),
            samples,
            ratio: None,
            goals: Vec::new(),
        }
    }

    pub(crate) fn median(&self) -> f64 {
        median(&self.samples)
    }

    fn min(&self) -> f64 {
        self.samples.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn max(&self) -> f64 {
        self.samples.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    pub(crate) fn ratio(mut self, value: f64, against: &str) -> Row {
        self.ratio = Some((value, against.to_owned()));
        self
    }

    pub(crate) fn goal(mut self, text: &str, pass: bool) -> Row {
        self.goals.push(Goal {
            text: text.to_owned(),
            pass,
        });
        self
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "workload": self.label,
            "unit": self.unit,
            "median": self.median(),
            "min": self.min(),
            "max": self.max(),
            "samples": self.samples,
            "ratio": self.ratio.as_ref().map(|(v, against)| json!({"value": v, "against": against})),
            "goals": self.goals.iter().map(|g| json!({"goal": g.text, "pass": g.pass})).collect::<Vec<_>>(),
        })
    }
}

pub(crate) fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Everything measured so far, and what could not be.
#[derive(Default)]
pub(crate) struct Results {
    pub(crate) rows: Vec<Row>,
    pub(crate) notes: Vec<String>,
}

impl Results {
    fn get(&self, id: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.id == id)
    }

    pub(crate) fn note(&mut self, note: String) {
        eprintln!("xtask: bench: {note}");
        self.notes.push(note);
    }
}

/// One workload: it adds its rows to the results, or says why it could not.
type Workload = fn(&Paths, &mut Results) -> Result<(), String>;

/// The arguments of one CLI invocation, fresh for each (`create` needs new titles).
type Invocation = Box<dyn FnMut() -> Vec<String>>;

/// The workloads, by the name `--only` selects them with.
const WORKLOADS: [(&str, &str, Workload); 7] = [
    ("store", "store cycle", store_cycle),
    ("contention", "contention", contention),
    ("tick", "dispatcher tick", tick),
    ("cli", "CLI latency", cli_latency),
    ("footprint", "gateway footprint", gateway_footprint),
    ("decomposition", "decomposition turnaround", decomposition),
    ("postgres", "PostgreSQL store", postgres::run),
];

pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let names: Vec<&str> = WORKLOADS.iter().map(|(key, _, _)| *key).collect();
    let usage = format!("expected --peer or --only {}[,...]", names.join("|"));
    let mut with_peer = false;
    let mut only: Option<Vec<&str>> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--peer" => with_peer = true,
            "--only" => {
                let list = args
                    .next()
                    .ok_or_else(|| format!("bench: --only needs a list ({usage})"))?;
                let keys: Vec<&str> = list.split(',').map(str::trim).collect();
                if let Some(unknown) = keys.iter().find(|k| !names.contains(k)) {
                    return Err(format!("bench: no workload {unknown:?} ({usage})"));
                }
                only = Some(keys);
            }
            other => return Err(format!("bench: unknown argument {other:?} ({usage})")),
        }
    }
    let selected: Vec<_> = WORKLOADS
        .iter()
        .filter(|(key, _, _)| only.as_ref().is_none_or(|keys| keys.contains(key)))
        .collect();
    // The SQLite workloads and the peer need the binaries and the SQLite and gateway
    // examples; the PostgreSQL rows need only their own example.
    let mut build = vec!["build", "--release", "--bins", "--examples"];
    if with_peer || selected.iter().any(|(key, _, _)| *key != "postgres") {
        build.extend([
            "-p",
            "board-sqlite",
            "-p",
            "gateway",
            "-p",
            "cli",
            "-p",
            "fake-llm",
        ]);
    }
    if selected.iter().any(|(key, _, _)| *key == "postgres") {
        build.extend(["-p", "board-postgres"]);
    }
    crate::run(&crate::cargo(), &build)?;
    let paths = Paths::new(root);
    if paths.work.exists() {
        std::fs::remove_dir_all(&paths.work)
            .map_err(|e| format!("cannot empty {}: {e}", paths.work.display()))?;
    }
    mkdir(&paths.work)?;
    let started = Instant::now();
    let cores = cores();
    let mut results = Results::default();

    // Each workload reports what it could not measure and the others still run.
    for (_, name, workload) in selected {
        eprintln!("xtask: bench: {name} ...");
        if let Err(e) = workload(&paths, &mut results) {
            results.note(format!("{name}: not measured: {e}"));
        }
    }
    if with_peer {
        eprintln!("xtask: bench: peer (Python Hermes kanban) ...");
        peer::run(&paths, &mut results);
    }

    print_table(&results, cores);
    let out = paths.bench.join("results.json");
    let document = json!({
        "schema": 1,
        "created_at": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "machine": {"nproc": cores, "os": std::env::consts::OS, "arch": std::env::consts::ARCH},
        "runs": RUNS,
        "seconds": started.elapsed().as_secs_f64(),
        "rows": results.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "notes": results.notes,
    });
    let text = serde_json::to_string_pretty(&document).map_err(|e| e.to_string())?;
    std::fs::write(&out, text + "\n").map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!(
        "\nresults: {}  ({:.0} s)",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn cores() -> usize {
    Command::new("nproc")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(0)
}

pub(crate) fn mkdir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Runs a program to completion; a failure carries its stderr.
pub(crate) fn output(cmd: &mut Command) -> Result<Output, String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What a program printed on stdout, as JSON: the whole of it (`kanban --json` may
/// pretty-print), else its last line (the examples' figures).
pub(crate) fn json_line(out: &Output) -> Result<Value, String> {
    let text = String::from_utf8_lossy(&out.stdout);
    if let Ok(v) = serde_json::from_str(&text) {
        return Ok(v);
    }
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("expected one JSON line, got {line:?}: {e}"))
}

/// Runs a workload example and returns its figures.
fn example(paths: &Paths, name: &str, args: &[&str]) -> Result<Value, String> {
    json_line(&output(Command::new(paths.examples.join(name)).args(args))?)
}

fn number(v: &Value, key: &str) -> Result<f64, String> {
    v[key].as_f64().ok_or_else(|| format!("no number {key:?} in {v}"))
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str().ok_or_else(|| format!("{} is not UTF-8", p.display()))
}

/// Workload 1: claim -> complete through the `Store` API against the raw rate of
/// one-row write transactions, FULL and NORMAL, interleaved run by run so a busy
/// moment of the machine hits the figure and its baseline alike.
fn store_cycle(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let modes = [
        ("full", "FULL", "8000", "2500"),
        ("normal", "NORMAL", "60000", "8000"),
    ];
    let mut raw = [Vec::new(), Vec::new()];
    let mut cycles = [Vec::new(), Vec::new()];
    let mut errors = 0.0;
    for run in 0..=RUNS {
        for (i, (sync, _, raw_max, cycle_max)) in modes.iter().enumerate() {
            let dir = paths.work.join(format!("store-{sync}"));
            let dir = path_str(&dir)?;
            let common = ["--dir", dir, "--sync", sync, "--seconds", STORE_SECONDS];
            let r = example(
                paths,
                "bench_store",
                &[&["raw", "--max", raw_max], &common[..]].concat(),
            )?;
            let c = example(
                paths,
                "bench_store",
                &[&["cycle", "--max", cycle_max], &common[..]].concat(),
            )?;
            errors += number(&c, "errors")?;
            if run > 0 {
                raw[i].push(number(&r, "tx_per_sec")?);
                cycles[i].push(number(&c, "cycles_per_sec")?);
            }
        }
    }
    if errors > 0.0 {
        results.note(format!("store cycle: {errors} store errors surfaced"));
    }
    for (i, (sync, shown, _, _)) in modes.iter().enumerate() {
        let raw_row = Row::new(
            &format!("store.raw.{sync}"),
            &format!("raw 1-row tx ({shown})"),
            "tx/s",
            raw[i].clone(),
        );
        let ceiling = raw_row.median() / 2.0;
        let mut row = Row::new(
            &format!("store.cycle.{sync}"),
            &format!("store cycle ({shown})"),
            "cycles/s",
            cycles[i].clone(),
        );
        let ratio = row.median() / ceiling;
        row = row.ratio(ratio, &format!("raw/2 ({shown})"));
        row = match *sync {
            "full" => row.goal(">= 80% of raw/2", ratio >= 0.8),
            _ => {
                let pass = row.median() >= 10_000.0;
                row.goal(">= 10,000 cycles/s", pass)
            }
        };
        results.rows.push(raw_row);
        results.rows.push(row);
    }
    Ok(())
}

/// Workload 2: four processes claiming and completing on one board file at once.
fn contention(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let dir = paths.work.join("contention");
    let dir = path_str(&dir)?;
    let mut rate = Vec::new();
    let mut errors = Vec::new();
    for run in 0..=RUNS {
        let args = [
            "contend",
            "--dir",
            dir,
            "--procs",
            "4",
            "--per",
            "2500",
            "--seconds",
            STORE_SECONDS,
        ];
        let c = example(paths, "bench_store", &args)?;
        if let Some(samples) = c["error_samples"].as_array().filter(|s| !s.is_empty()) {
            results.note(format!("contention: errors surfaced, e.g. {}", samples[0]));
        }
        if run > 0 {
            rate.push(number(&c, "cycles_per_sec")?);
            errors.push(number(&c, "errors")?);
        }
    }
    let single = results.get("store.cycle.normal").map(Row::median);
    let total_errors: f64 = errors.iter().sum();
    let mut row = Row::new(
        "contention.cycles",
        "contention, 4 procs (NORMAL)",
        "cycles/s",
        rate,
    );
    match single {
        Some(single) => {
            let ratio = row.median() / single;
            row = row
                .ratio(ratio, "1-proc cycle (NORMAL)")
                .goal(">= 70% of 1-proc", ratio >= 0.7);
        }
        None => results.note("contention: no single-process figure to compare with".to_owned()),
    }
    results.rows.push(row);
    results.rows.push(
        Row::new(
            "contention.errors",
            "contention errors surfaced",
            "errors",
            errors,
        )
        .goal("0", total_errors == 0.0),
    );
    Ok(())
}

/// Builds (or reuses) the tick boards. A board is rebuilt only when the schema version
/// or the board's shape changed, since the 100k one takes a while.
fn boards(paths: &Paths) -> Result<(), String> {
    mkdir(&paths.bench.join("boards"))?;
    let shape = |size: usize| format!("tasks {size}, ready {BOARD_READY}, triage {BOARD_TRIAGE}, schema ");
    for size in BOARD_SIZES {
        let board = paths.board(size);
        let stamp = board.with_extension("stamp");
        let version = example(paths, "bench_tick", &["version"])?;
        let wanted = format!("{}{}", shape(size), version["schema_version"]);
        let current = std::fs::read_to_string(&stamp).unwrap_or_default();
        if board.exists() && current.trim() == wanted {
            continue;
        }
        for stale in [
            board.clone(),
            board.with_extension("db-wal"),
            board.with_extension("db-shm"),
        ] {
            let _ = std::fs::remove_file(stale);
        }
        eprintln!("xtask: bench: building the {size}-task board (once; reused until the schema changes)");
        let (size_s, ready_s, triage_s) = (
            size.to_string(),
            BOARD_READY.to_string(),
            BOARD_TRIAGE.to_string(),
        );
        let built = example(
            paths,
            "bench_tick",
            &[
                "build",
                "--db",
                path_str(&board)?,
                "--tasks",
                &size_s,
                "--ready",
                &ready_s,
                "--triage",
                &triage_s,
            ],
        )?;
        eprintln!("xtask: bench: built in {:.1} s", number(&built, "seconds")?);
        std::fs::write(&stamp, wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    Ok(())
}

/// A fresh home holding a copy of a built board.
fn home_with_board(paths: &Paths, size: usize, name: &str) -> Result<PathBuf, String> {
    let home = paths.work.join(name);
    if home.exists() {
        std::fs::remove_dir_all(&home).map_err(|e| format!("cannot empty {}: {e}", home.display()))?;
    }
    mkdir(&home)?;
    let board = paths.board(size);
    std::fs::copy(&board, home.join("kanban.db"))
        .map_err(|e| format!("cannot copy {}: {e}", board.display()))?;
    Ok(home)
}

fn size_name(size: usize) -> String {
    format!("{}k", size / 1000)
}

/// Workload 3: one dispatcher tick on boards of 1k, 10k and 100k tasks.
fn tick(paths: &Paths, results: &mut Results) -> Result<(), String> {
    boards(paths)?;
    let mut rows = Vec::new();
    let ticks = TICKS_PER_RUN.to_string();
    for size in BOARD_SIZES {
        let mut samples = Vec::new();
        for run in 0..=RUNS {
            let home = home_with_board(paths, size, &format!("tick-{size}"))?;
            let figures = example(
                paths,
                "bench_tick",
                &["tick", "--home", path_str(&home)?, "--ticks", &ticks],
            )?;
            if run > 0 {
                let ms = figures["ticks_ms"]
                    .as_array()
                    .ok_or("bench_tick printed no ticks_ms")?;
                samples.extend(ms.iter().filter_map(Value::as_f64));
            }
        }
        let name = size_name(size);
        rows.push(Row::new(
            &format!("tick.{name}"),
            &format!("tick, {name} tasks"),
            "ms",
            samples,
        ));
    }
    results.note(format!(
        "tick: every board has {BOARD_READY} ready and {BOARD_TRIAGE} cooling triage cards, the rest done \
         (so the 1k board holds {} tasks)",
        BOARD_READY + BOARD_TRIAGE
    ));
    if let [small, _, large] = rows.as_mut_slice() {
        let ratio = large.median() / small.median();
        let pass = large.median() < 5.0;
        *large = large
            .clone()
            .ratio(ratio, "tick, 1k tasks")
            .goal("< 5 ms", pass)
            .goal("100k/1k < 2", ratio < 2.0);
    }
    results.rows.extend(rows);
    Ok(())
}

/// Times one whole `kanban` process, after checking it succeeded.
fn timed(cmd: &mut Command) -> Result<f64, String> {
    let started = Instant::now();
    output(cmd)?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// Workload 4: `kanban create`, `list --status ready` and `show ID` on the 100k board.
fn cli_latency(paths: &Paths, results: &mut Results) -> Result<(), String> {
    boards(paths)?;
    let home = home_with_board(paths, 100_000, "cli")?;
    let kanban = paths.kanban();
    let cli = |args: &[&str]| {
        let mut cmd = Command::new(&kanban);
        cmd.arg("--home").arg(&home).args(args);
        cmd
    };
    // The first command on a home writes its config template: not what is timed.
    let ready = json_line(&output(&mut cli(&["list", "--status", "ready", "--json"]))?)?;
    let id = ready[0]["id"]
        .as_str()
        .ok_or("the 100k board has no ready task")?
        .to_owned();
    let mut n = 0;
    let mut next_title = move || {
        n += 1;
        format!("bench create {n}")
    };
    let verbs: [(&str, &str, Invocation); 3] = [
        (
            "create",
            "kanban create",
            Box::new(move || vec!["create".to_owned(), next_title()]),
        ),
        (
            "list",
            "kanban list --status ready",
            Box::new(|| ["list", "--status", "ready"].map(str::to_owned).to_vec()),
        ),
        (
            "show",
            "kanban show ID",
            Box::new(move || vec!["show".to_owned(), id.clone()]),
        ),
    ];
    for (key, label, mut args) in verbs {
        let mut samples = Vec::new();
        for i in 0..CLI_WARMUP + CLI_RUNS {
            let args = args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let ms = timed(&mut cli(&args))?;
            if i >= CLI_WARMUP {
                samples.push(ms);
            }
        }
        let row = Row::new(&format!("cli.{key}"), &format!("{label} (100k)"), "ms", samples);
        let pass = row.median() < 10.0;
        results.rows.push(row.goal("< 10 ms", pass));
    }
    Ok(())
}

/// A child process stopped with SIGTERM (then SIGKILL) when dropped.
pub(crate) struct Running {
    child: Child,
}

impl Running {
    pub(crate) fn spawn(cmd: &mut Command) -> Result<Running, String> {
        let shown = format!("{cmd:?}");
        cmd.stdin(Stdio::null())
            .spawn()
            .map(|child| Running { child })
            .map_err(|e| format!("cannot start {shown}: {e}"))
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running; an exit is an error with its status.
    fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("exited early ({status})")),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: a signal to a child this harness started and has not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Workers a gateway started: their process groups are killed when this is dropped,
/// since they outlive the gateway by design.
struct Workers {
    db: PathBuf,
    inspect: PathBuf,
}

impl Workers {
    fn pids(&self) -> Vec<i64> {
        let mut cmd = Command::new(&self.inspect);
        cmd.arg("inspect").arg("--db").arg(&self.db);
        output(&mut cmd)
            .and_then(|o| json_line(&o))
            .map(|v| {
                v["worker_pids"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_i64)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for pid in self.pids() {
            if pid > 1 {
                // SAFETY: each worker leads its own process group (docs/gateway.md); the pid
                // is one our gateway recorded for a run of this scratch board.
                unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
            }
        }
    }
}

/// Resident memory of a process, in MiB.
fn rss_mib(pid: u32) -> Result<f64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("{path} has no VmRSS"))?;
    Ok(kib / 1024.0)
}

/// The gateway's tick count from `gateway.json` (0 before its first tick).
fn ticks(home: &Path) -> u64 {
    std::fs::read_to_string(home.join("gateway.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["ticks"].as_u64())
        .unwrap_or(0)
}

/// Polls `done` every 20 ms until it holds, the gateway dies, or `limit` passes.
fn wait_for(
    gateway: &mut Running,
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        gateway
            .alive()
            .map_err(|e| format!("the gateway {e} while waiting for {what}"))?;
        if done()? {
            return Ok(());
        }
        if started.elapsed() > limit {
            return Err(format!(
                "timed out after {} s waiting for {what}",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A new home with `config.yaml` replaced by `config`.
fn new_home(paths: &Paths, name: &str, config: &str) -> Result<PathBuf, String> {
    let home = paths.work.join(name);
    if home.exists() {
        std::fs::remove_dir_all(&home).map_err(|e| format!("cannot empty {}: {e}", home.display()))?;
    }
    output(Command::new(paths.kanban()).arg("--home").arg(&home).arg("init"))?;
    std::fs::write(home.join("config.yaml"), config).map_err(|e| format!("cannot write config.yaml: {e}"))?;
    Ok(home)
}

fn start_gateway(paths: &Paths, home: &Path) -> Result<Running, String> {
    let log = std::fs::File::create(home.join("gateway.log")).map_err(|e| format!("gateway.log: {e}"))?;
    Running::spawn(
        Command::new(paths.release.join("kanban-gateway"))
            .arg("--home")
            .arg(home)
            .stdout(Stdio::null())
            .stderr(log),
    )
}

/// Workload 5: the gateway's resident memory idle, and with 100 running workers.
fn gateway_footprint(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let mut idle = Vec::new();
    let mut busy = Vec::new();
    let inspect = paths.examples.join("bench_store");
    for run in 0..GATEWAY_RUNS {
        let config = "kanban:\n  dispatch_interval_seconds: 0.2\n  max_spawn: 0\n";
        let home = new_home(paths, &format!("gateway-idle-{run}"), config)?;
        let mut gateway = start_gateway(paths, &home)?;
        wait_for(&mut gateway, Duration::from_secs(30), "5 ticks", || {
            Ok(ticks(&home) >= 5)
        })?;
        idle.push(rss_mib(gateway.pid())?);
        drop(gateway);

        let config = format!(
            "kanban:\n  dispatch_interval_seconds: 0.2\n  max_spawn: {BUSY_WORKERS}\n\
             profiles:\n  default:\n    command: [\"sleep\", \"600\"]\n"
        );
        let home = new_home(paths, &format!("gateway-busy-{run}"), &config)?;
        let db = home.join("kanban.db");
        let workers = BUSY_WORKERS.to_string();
        example(
            paths,
            "bench_store",
            &[
                "populate",
                "--db",
                path_str(&db)?,
                "--ready",
                &workers,
                "--assignee",
                "default",
            ],
        )?;
        let mut gateway = start_gateway(paths, &home)?;
        // Declared after the gateway so it drops first: the workers die before it stops.
        let running = Workers {
            db: db.clone(),
            inspect: inspect.clone(),
        };
        wait_for(
            &mut gateway,
            Duration::from_secs(60),
            "100 running workers",
            || {
                let v = example(paths, "bench_store", &["inspect", "--db", path_str(&db)?])?;
                Ok(v["worker_pids"].as_array().map_or(0, Vec::len) >= BUSY_WORKERS)
            },
        )?;
        let after = ticks(&home) + 2;
        wait_for(&mut gateway, Duration::from_secs(30), "2 more ticks", || {
            Ok(ticks(&home) >= after)
        })?;
        busy.push(rss_mib(gateway.pid())?);
        drop(running);
        drop(gateway);
    }
    let row = Row::new("gateway.rss.idle", "gateway RSS, idle", "MiB", idle);
    let pass = row.median() < 20.0;
    let idle_median = row.median();
    results.rows.push(row.goal("< 20 MiB", pass));
    let row = Row::new("gateway.rss.busy", "gateway RSS, 100 workers", "MiB", busy);
    let ratio = row.median() / idle_median;
    results.rows.push(row.ratio(ratio, "gateway RSS, idle"));
    Ok(())
}

/// Workload 6: from a triage card's creation to its children in the db, with an
/// instant fake model and a 1 s tick. Timed from the moment `kanban create` returns.
fn decomposition(paths: &Paths, results: &mut Results) -> Result<(), String> {
    mkdir(&paths.work)?;
    let script = paths.work.join("split-script.json");
    std::fs::write(&script, SPLIT_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    let mut fake = Running::spawn(
        Command::new(paths.release.join("fake-llm"))
            .args(["serve", "--port", "0", "--script"])
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )?;
    let stdout = fake.child.stdout.take().ok_or("fake-llm has no stdout")?;
    let mut base_url = String::new();
    BufReader::new(stdout)
        .read_line(&mut base_url)
        .map_err(|e| format!("reading fake-llm's base URL: {e}"))?;
    let base_url = base_url.trim();
    if !base_url.starts_with("http") {
        return Err(format!("fake-llm printed {base_url:?} instead of its base URL"));
    }
    let config = format!(
        "model:\n  base_url: {base_url}\n  default: bench-model\n  api_key_env: KANBAN_BENCH_NO_KEY\n\
         kanban:\n  dispatch_interval_seconds: 1\n  max_spawn: 0\n"
    );
    let home = new_home(paths, "decompose", &config)?;
    let db = home.join("kanban.db");
    let mut gateway = start_gateway(paths, &home)?;
    wait_for(&mut gateway, Duration::from_secs(30), "the first tick", || {
        Ok(ticks(&home) >= 1)
    })?;
    let mut samples = Vec::new();
    for run in 0..=RUNS {
        let created = output(Command::new(paths.kanban()).arg("--home").arg(&home).args([
            "create",
            &format!("rough idea {run}"),
            "--triage",
            "--json",
        ]))?;
        let started = Instant::now();
        let card = json_line(&created)?;
        let id = card["id"]
            .as_str()
            .ok_or("kanban create --json printed no id")?
            .to_owned();
        wait_for(
            &mut gateway,
            Duration::from_secs(30),
            "the card's children",
            || {
                let v = example(
                    paths,
                    "bench_store",
                    &["inspect", "--db", path_str(&db)?, "--subtasks", &id],
                )?;
                Ok(v["subtasks"].as_u64().unwrap_or(0) > 0)
            },
        )?;
        if run > 0 {
            samples.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    drop(gateway);
    results.rows.push(Row::new(
        "decompose.turnaround",
        "triage -> children (1 s tick)",
        "ms",
        samples,
    ));
    Ok(())
}

/// Four significant figures at most, without exponent noise.
pub(crate) fn show(v: f64) -> String {
    if !v.is_finite() {
        "-".to_owned()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn print_table(results: &Results, cores: usize) {
    println!("\nmachine: {cores} cores (nproc); {RUNS} runs per workload after a warm-up\n");
    println!(
        "{:<34} {:>9} {:>9} {:>9}  {:<9} {:<30} goal",
        "workload", "median", "min", "max", "unit", "ratio"
    );
    for r in &results.rows {
        let ratio = r
            .ratio
            .as_ref()
            .map(|(v, against)| format!("{} x {against}", show(*v)))
            .unwrap_or_default();
        let goals = r
            .goals
            .iter()
            .map(|g| format!("{} {}", g.text, if g.pass { "pass" } else { "MISS" }))
            .collect::<Vec<_>>()
            .join("; ");
        println!(
            "{:<34} {:>9} {:>9} {:>9}  {:<9} {:<30} {goals}",
            r.label,
            show(r.median()),
            show(r.min()),
            show(r.max()),
            r.unit,
            ratio
        );
    }
    for note in &results.notes {
        println!("note: {note}");
    }
}
