//! The parts of the store workloads of `cargo xtask bench` that do not depend on the
//! backend: the command line of a `bench_store` example, the claim -> complete loop
//! through the `Store` trait, and copies of the example run as contending processes
//! from a common start.
//!
//! A workload prints one JSON line of figures on stdout and exits 0, or one line on
//! stderr and exits 1; xtask repeats, aggregates and compares.
//!
//! ```no_run
//! use store_bench::{Flags, Workload};
//!
//! fn hello(f: &Flags) -> Result<serde_json::Value, String> {
//!     let n: u32 = store_bench::number(f, "times")?;
//!     Ok(serde_json::json!({ "hello": n }))
//! }
//!
//! let workloads: &[(&str, Workload)] = &[("hello", hello)];
//! store_bench::main("bench_store", workloads);
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{Completion, Store, StoreError, TaskId, Timestamp};
use serde_json::{json, Value};

/// `--name value` pairs of one invocation.
pub type Flags = HashMap<String, String>;

/// One subcommand: its figures, or why it could not measure.
pub type Workload = fn(&Flags) -> Result<Value, String>;

/// How long after the start-up of the contenders they all begin, so that they contend
/// from their first cycle rather than the first one running alone while the others
/// start up.
const START_DELAY: Duration = Duration::from_millis(300);

/// Runs the workload named by the first argument with the flags that follow, prints its
/// figures as one JSON line, and exits; an error is one line on stderr and exit code 1.
pub fn main(program: &str, workloads: &[(&str, Workload)]) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = workloads.iter().map(|(name, _)| *name).collect();
    let result = match args.split_first() {
        Some((command, rest)) => {
            flags(rest).and_then(|f| match workloads.iter().find(|(name, _)| name == command) {
                Some((_, workload)) => workload(&f),
                None => Err(format!(
                    "unknown subcommand {command:?} (expected {})",
                    names.join("|")
                )),
            })
        }
        None => Err(format!("usage: {program} {} --flag value ...", names.join("|"))),
    };
    match result {
        Ok(figures) => {
            println!("{figures}");
            std::process::exit(0)
        }
        Err(message) => {
            eprintln!("{program}: {message}");
            std::process::exit(1)
        }
    }
}

fn flags(args: &[String]) -> Result<Flags, String> {
    let mut out = Flags::new();
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let name = key
            .strip_prefix("--")
            .ok_or_else(|| format!("expected a --flag, got {key:?}"))?;
        let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
        out.insert(name.to_owned(), value.clone());
    }
    Ok(out)
}

/// The value of `--name`.
pub fn text<'a>(f: &'a Flags, name: &str) -> Result<&'a str, String> {
    f.get(name)
        .map(String::as_str)
        .ok_or_else(|| format!("missing --{name}"))
}

/// The value of `--name` as a number.
pub fn number<T: std::str::FromStr>(f: &Flags, name: &str) -> Result<T, String> {
    text(f, name)?
        .parse()
        .map_err(|_| format!("--{name}: not a number"))
}

/// The time budget of one measurement, `--seconds`.
pub fn budget(f: &Flags) -> Result<Duration, String> {
    let seconds: f64 = number(f, "seconds")?;
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("--seconds: {seconds} is not a duration"))
}

/// The board's clock: whole seconds since the epoch.
pub fn now() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as Timestamp)
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// What a claim -> complete loop achieved.
#[derive(Debug, Default)]
pub struct Cycles {
    /// Tasks claimed and completed.
    pub done: u64,
    /// Calls that failed with something other than a lost race.
    pub errors: u64,
    /// Claims or completions another writer won.
    pub lost: u64,
    /// The first few errors, for the report.
    pub samples: Vec<String>,
}

impl Cycles {
    /// Counts a failed call: a lost race, or an error worth showing.
    pub fn failed(&mut self, what: &str, e: StoreError) {
        if e.refusal().is_some_and(|r| r.is_lost_race()) {
            self.lost += 1;
        } else {
            self.errors += 1;
            if self.samples.len() < 5 {
                self.samples.push(format!("{what}: {e}"));
            }
        }
    }

    /// Completes the run `run_id` of `id`, guarded by it, and counts the outcome.
    pub fn complete<S: Store + ?Sized>(&mut self, store: &S, id: &TaskId, run_id: i64, now: Timestamp) {
        let completion = Completion {
            expected_run_id: Some(run_id),
            result: Some("done".to_owned()),
            ..Completion::default()
        };
        match store.complete(id, &completion, now) {
            Ok(true) => self.done += 1,
            Ok(false) => self.lost += 1,
            Err(e) => self.failed("complete", e),
        }
    }

    /// The figures of a loop that ran for `seconds`.
    pub fn figures(&self, seconds: f64) -> Value {
        json!({
            "cycles": self.done, "seconds": seconds, "cycles_per_sec": self.done as f64 / seconds,
            "errors": self.errors, "lost": self.lost, "error_samples": self.samples,
        })
    }
}

/// Claims then completes each of `ids` in turn through the `Store` trait until the
/// budget, counted from `started`, is spent.
pub fn run_cycles<S: Store + ?Sized>(
    store: &S,
    ids: &[TaskId],
    budget: Duration,
    started: Instant,
) -> Cycles {
    let mut out = Cycles::default();
    for id in ids {
        if started.elapsed() >= budget {
            break;
        }
        let now = now();
        match store.claim(id, 900, now) {
            Ok(claim) => out.complete(store, id, claim.run_id, now),
            Err(e) => out.failed("claim", e),
        }
    }
    out
}

/// What the copies of a contention workload reported, together.
#[derive(Debug)]
pub struct Contended {
    /// Each copy's figures (`Contender::report`).
    pub reports: Vec<Value>,
    /// From the first copy's start to the last one's end.
    pub seconds: f64,
}

impl Contended {
    /// The sum of a counter over the copies.
    pub fn sum(&self, key: &str) -> u64 {
        self.reports.iter().map(|r| r[key].as_u64().unwrap_or(0)).sum()
    }

    /// The figures of all copies together, as a contention workload prints them.
    pub fn figures(&self) -> Value {
        let cycles = self.sum("cycles");
        let samples: Vec<Value> = self
            .reports
            .iter()
            .flat_map(|r| r["error_samples"].as_array().cloned().unwrap_or_default())
            .collect();
        let rate = if self.seconds > 0.0 {
            cycles as f64 / self.seconds
        } else {
            0.0
        };
        json!({
            "procs": self.reports.len(), "cycles": cycles, "seconds": self.seconds,
            "cycles_per_sec": rate, "errors": self.sum("errors"), "lost": self.sum("lost"),
            "error_samples": samples,
        })
    }
}

/// Runs copies of this binary at once, one per argument list (each gets `--start-at` as
/// well: see [`Contender`]), and collects the JSON line each prints.
pub fn contend(copies: Vec<Vec<OsString>>) -> Result<Contended, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let start_at = unix_ns() + START_DELAY.as_nanos();
    let mut children = Vec::new();
    for args in copies {
        let spawned = Command::new(&exe)
            .args(args)
            .args(["--start-at", &start_at.to_string()])
            .stdout(Stdio::piped())
            .spawn();
        match spawned {
            Ok(child) => children.push(child),
            Err(e) => {
                for mut started in children {
                    let _ = started.kill();
                    let _ = started.wait();
                }
                return Err(format!("cannot start a contender: {e}"));
            }
        }
    }
    let mut reports = Vec::new();
    let mut failed = None;
    // Every child is waited for, even after one failed, so none is left running.
    for child in children {
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let line = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            failed = Some(format!("a contender failed ({})", out.status));
            continue;
        }
        match serde_json::from_str::<Value>(line.trim()) {
            Ok(report) => reports.push(report),
            Err(e) => failed = Some(format!("a contender printed {line:?}: {e}")),
        }
    }
    if let Some(failed) = failed {
        return Err(failed);
    }
    let first = reports.iter().filter_map(|r| r["started_ns"].as_u64()).min();
    let last = reports.iter().filter_map(|r| r["ended_ns"].as_u64()).max();
    let seconds = match (first, last) {
        (Some(first), Some(last)) => last.saturating_sub(first) as f64 / 1e9,
        _ => 0.0,
    };
    Ok(Contended { reports, seconds })
}

/// One copy started by [`contend`]: it waits for the common start, then measures.
pub struct Contender {
    started_ns: u128,
}

impl Contender {
    /// Waits until the `--start-at` of the flags.
    pub fn start(f: &Flags) -> Result<Contender, String> {
        let start_at: u128 = number(f, "start-at")?;
        let wait = start_at.saturating_sub(unix_ns());
        std::thread::sleep(Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX)));
        Ok(Contender {
            started_ns: unix_ns(),
        })
    }

    /// This copy's figures, with the span it measured over.
    pub fn report(&self, cycles: &Cycles) -> Value {
        json!({
            "cycles": cycles.done, "errors": cycles.errors, "lost": cycles.lost,
            "error_samples": cycles.samples,
            "started_ns": self.started_ns as u64, "ended_ns": unix_ns() as u64,
        })
    }
}
