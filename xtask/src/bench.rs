//! `cargo xtask bench [--peer] [--only WORKLOAD,...]`: the performance harness (issue 6);
//! `cargo xtask bench --scale 1m`: the commands on 1k, 100k and 1M-task boards with their
//! peak memory (issue 19, `scale.rs`; results in `target/bench/scale-1m.json`).
//!
//! Builds the release binaries and the workload examples once, then runs each workload
//! after a warm-up several times and prints a table (median, min, max, unit, the ratio
//! against its baseline, the goal and whether it is met) and writes
//! `target/bench/results.json` so two runs can be compared. Every baseline is measured
//! in the same invocation, on the same disk, as the figure it is compared with.
//!
//! The workloads live next to the code they exercise (`crates/board-sqlite/examples/
//! bench_store.rs`, `crates/board-postgres/examples/bench_store.rs`,
//! `crates/gateway/examples/bench_tick.rs`, `crates/web/examples/bench_web.rs`) and print one JSON line of figures each; xtask
//! only starts processes and reads what they print, so it depends on none of our crates.
//! `--only` runs some of them (`--only postgres`: the PostgreSQL rows, see
//! `postgres.rs`; `--only web`: the web board in headless Chromium, see `web.rs`; `--only
//! scale`: the dispatcher tick on a 100k-task PostgreSQL board, whole-loop throughput
//! with 1, 2 and 4 gateways and the ready-to-spawned latency, see `scale.rs`; `--only
//! hosts`: gateways on separate hosts of the test rig, see `hosts.rs`); `--peer`
//! adds the same store and CLI workloads run against the Python Hermes kanban (see
//! `peer.rs`). `--debug` runs the workloads on debug builds at a small scale: a check
//! that they work, not a measurement.

mod board;
mod gateway;
mod hosts;
mod lanes;
mod limits;
mod million;
mod outage;
mod peer;
mod postgres;
mod scale;
mod store;
mod web;

use board::{cli_latency, tick};
use gateway::{decomposition, gateway_footprint};
use store::{contention, store_cycle};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

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
    /// `target/release`, or `target/debug` with `--debug`.
    pub(crate) bins: PathBuf,
    pub(crate) examples: PathBuf,
    /// `--debug`: a check of the workloads at a small scale, not a measurement.
    pub(crate) small: bool,
    /// `target/bench`: results, cached boards, the peer's virtualenv.
    pub(crate) bench: PathBuf,
    /// `target/bench/work`: scratch homes and boards, emptied at every start.
    pub(crate) work: PathBuf,
}

impl Paths {
    fn new(root: &Path, debug: bool) -> Paths {
        let target = crate::target_dir(root);
        let bench = target.join("bench");
        let bins = target.join(if debug { "debug" } else { "release" });
        Paths {
            examples: bins.join("examples"),
            bins,
            small: debug,
            work: bench.join("work"),
            bench,
        }
    }

    /// The paths with `work/` emptied, as every run starts.
    fn emptied(root: &Path, debug: bool) -> Result<Paths, String> {
        let paths = Paths::new(root, debug);
        if paths.work.exists() {
            std::fs::remove_dir_all(&paths.work)
                .map_err(|e| format!("cannot empty {}: {e}", paths.work.display()))?;
        }
        mkdir(&paths.work)?;
        Ok(paths)
    }

    pub(crate) fn kanban(&self) -> PathBuf {
        self.bins.join("kanban")
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
const WORKLOADS: [(&str, &str, Workload); 12] = [
    ("store", "store cycle", store_cycle),
    ("contention", "contention", contention),
    ("tick", "dispatcher tick", tick),
    ("cli", "CLI latency", cli_latency),
    ("footprint", "gateway footprint", gateway_footprint),
    ("decomposition", "decomposition turnaround", decomposition),
    ("outage", "outage cost", outage::ours),
    ("postgres", "PostgreSQL store", postgres::run),
    ("web", "web board (headless Chromium)", web::web),
    ("lanes", "lanes: agents pulling work over HTTP", lanes::run),
    ("hosts", "hosts apart: throughput, death to elsewhere", hosts::run),
    (
        "scale",
        "scale-out: PostgreSQL tick, gateways, wake-ups",
        scale::run,
    ),
];

/// `--scale SIZE`: the scale workload alone (see `scale.rs`).
fn scale_arg(args: &[String]) -> Option<Result<&str, String>> {
    let at = args.iter().position(|a| a == "--scale")?;
    Some(match (args.get(at + 1), args.len()) {
        (Some(size), 2) => Ok(size.as_str()),
        _ => Err("bench: expected --scale 1m alone".to_owned()),
    })
}

/// `cargo xtask bench --scale SIZE`: builds what it runs, then the scale rows alone.
fn run_scale(root: &Path, size: &str) -> Result<(), String> {
    million::sizes(size)?;
    // The hidden 10k scale checks the harness on debug binaries, quickly.
    let profile = if size == "10k" { "debug" } else { "release" };
    // The same packages as the other workloads' build, so the features cargo unifies
    // are the same and one release build serves both.
    let mut build = vec![
        "build",
        "--bins",
        "--examples",
        "-p",
        "board-sqlite",
        "-p",
        "gateway",
        "-p",
        "cli",
        "-p",
        "fake-llm",
    ];
    if profile == "release" {
        build.insert(1, "--release");
    }
    crate::run(&crate::cargo(), &build)?;
    let paths = Paths::emptied(root, profile == "debug")?;
    let started = Instant::now();
    let mut results = Results::default();
    million::run(&paths, &mut results, size)?;
    finish(&paths, &results, started, &format!("scale-{size}.json"))
}

/// `--peer`, `--debug` and the keys of `--only`, when given.
fn parse_args(args: &[String]) -> Result<(bool, bool, Option<Vec<&str>>), String> {
    let names: Vec<&str> = WORKLOADS.iter().map(|(key, _, _)| *key).collect();
    let usage = format!("expected --peer, --debug or --only {}[,...]", names.join("|"));
    let mut with_peer = false;
    let mut debug = false;
    let mut only: Option<Vec<&str>> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--peer" => with_peer = true,
            "--debug" => debug = true,
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
    Ok((with_peer, debug, only))
}

pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    if let Some(size) = scale_arg(args) {
        return run_scale(root, size?);
    }
    let (with_peer, debug, only) = parse_args(args)?;
    let selected: Vec<_> = WORKLOADS
        .iter()
        .filter(|(key, _, _)| only.as_ref().is_none_or(|keys| keys.contains(key)))
        .collect();
    // The SQLite workloads and the peer need the binaries and the SQLite and gateway
    // examples; the PostgreSQL rows need only their own example.
    let mut build = vec!["build", "--bins", "--examples"];
    if !debug {
        build.push("--release");
    }
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
    if selected.iter().any(|(key, _, _)| matches!(*key, "web" | "lanes")) {
        build.extend(["-p", "web"]);
    }
    if selected.iter().any(|(key, _, _)| *key == "postgres") {
        build.extend(["-p", "board-postgres"]);
    }
    crate::run(&crate::cargo(), &build)?;
    let paths = Paths::emptied(root, debug)?;
    let started = Instant::now();
    let mut results = Results::default();

    // Each workload reports what it could not measure and the others still run.
    for (_, name, workload) in &selected {
        eprintln!("xtask: bench: {name} ...");
        if let Err(e) = workload(&paths, &mut results) {
            results.note(format!("{name}: not measured: {e}"));
        }
    }
    if with_peer {
        eprintln!("xtask: bench: peer (Python Hermes kanban) ...");
        let keys: Vec<&str> = selected.iter().map(|(key, _, _)| *key).collect();
        peer::run(&paths, &mut results, &keys);
    }

    finish(&paths, &results, started, "results.json")
}

/// Prints the table and writes the JSON document `target/bench/NAME`.
fn finish(paths: &Paths, results: &Results, started: Instant, name: &str) -> Result<(), String> {
    let cores = cores();
    print_table(results, cores);
    let out = paths.bench.join(name);
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

/// Copies a prebuilt board to `to` and flushes the copy to disk, so that no measurement
/// pays for writing back the copy's pages (the first fsync after a copy of a large file
/// would flush all of it, and stall every writer on the disk meanwhile).
pub(crate) fn copy_board(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .and_then(|_| std::fs::File::open(to))
        .and_then(|copy| copy.sync_all())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
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

/// A web benchmark (`bench_web`, `bench_lanes`) on the release `kanban` and `home`,
/// `runs` runs.
fn served_example(paths: &Paths, name: &str, home: &Path, runs: usize) -> Result<Value, String> {
    let runs = runs.to_string();
    let kanban = paths.kanban();
    let args = [
        "--kanban",
        path_str(&kanban)?,
        "--home",
        path_str(home)?,
        "--runs",
        &runs,
    ];
    example(paths, name, &args)
}

fn number(v: &Value, key: &str) -> Result<f64, String> {
    v[key].as_f64().ok_or_else(|| format!("no number {key:?} in {v}"))
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str().ok_or_else(|| format!("{} is not UTF-8", p.display()))
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
