//! The PostgreSQL rows of `cargo xtask bench`, on the server of `KANBAN_TEST_DATABASE_URL`:
//! the store cycle against pgbench's simple-update rate on the same server, and claims
//! from one shared ready queue by 1, 2 and 4 processes. The workloads are
//! `crates/board-postgres/examples/bench_store.rs` (built as `bench_store_postgres`); each
//! run interleaves them, so a busy moment of the machine hits a figure and its baseline
//! alike. An unreachable server skips these rows with a note, and the rest still run.

use std::process::Command;

use serde_json::Value;

use super::{json_line, median, number, output, Paths, Results, Row, RUNS, STORE_SECONDS};
use crate::pg::{Server, HINT, URL_VAR};

pub(crate) const EXAMPLE: &str = "bench_store_postgres";
/// `pgbench -T`: whole seconds of the baseline per run.
const PGBENCH_SECONDS: &str = "3";
/// Tasks put in the ready queue per measurement, per second of budget and pgbench
/// transaction per second measured in the same run: three times what the store cycle
/// reaches at pgbench's rate (a cycle is two transactions), so the queue outlasts the
/// budget without taking minutes to fill.
const TASKS_PER_TPS: f64 = 1.5;
const MIN_TASKS: f64 = 100.0;
const CLAIMERS: [usize; 3] = [1, 2, 4];

pub(crate) fn run(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let server = Server::from_env();
    if let Err(why) = server.reachable() {
        results.note(format!(
            "PostgreSQL rows skipped: {} is unreachable ({why}); {HINT}",
            server.shown()
        ));
        return Ok(());
    }
    let samples = measure(paths, &server, results)?;
    report(samples, results);
    Ok(())
}

/// The figures of every run after the first (a warm-up), and the errors of all runs.
struct Samples {
    tps: Vec<f64>,
    cycles: Vec<f64>,
    /// Claim rates per entry of `CLAIMERS`.
    claims: Vec<Vec<f64>>,
    double: Vec<f64>,
    errors: f64,
}

/// Runs pgbench, the store cycle and the claimers `RUNS + 1` times.
fn measure(paths: &Paths, server: &Server, results: &mut Results) -> Result<Samples, String> {
    let workload = |args: &[&str]| -> Result<Value, String> {
        let mut cmd = Command::new(paths.examples.join(EXAMPLE));
        cmd.env(URL_VAR, server.url()).args(args);
        json_line(&output(&mut cmd)?)
    };
    let mut tps = Vec::new();
    let mut cycles = Vec::new();
    let mut claims = vec![Vec::new(); CLAIMERS.len()];
    let mut double = Vec::new();
    let mut errors = 0.0;
    let budget: f64 = STORE_SECONDS
        .parse()
        .map_err(|_| format!("bad store budget {STORE_SECONDS:?}"))?;
    for run in 0..=RUNS {
        let baseline = number(&workload(&["pgbench", "--seconds", PGBENCH_SECONDS])?, "tps")?;
        let tasks = (baseline * budget * TASKS_PER_TPS)
            .max(MIN_TASKS)
            .ceil()
            .to_string();
        let cycle = workload(&["cycle", "--max", &tasks, "--seconds", STORE_SECONDS])?;
        errors += number(&cycle, "errors")?;
        let mut doubles = 0.0;
        let mut rates = Vec::new();
        for procs in CLAIMERS {
            let procs = procs.to_string();
            let c = workload(&[
                "claim",
                "--procs",
                &procs,
                "--max",
                &tasks,
                "--seconds",
                STORE_SECONDS,
            ])?;
            if let Some(sample) = c["error_samples"].as_array().and_then(|s| s.first()) {
                results.note(format!(
                    "postgres claims, {procs} procs: errors surfaced, e.g. {sample}"
                ));
            }
            errors += number(&c, "errors")?;
            doubles += number(&c, "double_claims")?;
            rates.push(number(&c, "cycles_per_sec")?);
        }
        if run > 0 {
            tps.push(baseline);
            cycles.push(number(&cycle, "cycles_per_sec")?);
            for (samples, rate) in claims.iter_mut().zip(rates) {
                samples.push(rate);
            }
            double.push(doubles);
        }
    }
    Ok(Samples {
        tps,
        cycles,
        claims,
        double,
        errors,
    })
}

/// The rows of the PostgreSQL figures, with their ratios and goals.
fn report(samples: Samples, results: &mut Results) {
    let Samples {
        tps,
        cycles,
        claims,
        double,
        errors,
    } = samples;
    if errors > 0.0 {
        results.note(format!("postgres: {errors} store errors surfaced"));
    }

    // Ratios are taken run by run, each figure against the baseline of its own run, and
    // their median reported: the speed of a shared machine's disk drifts between runs
    // more than between a figure and its baseline.
    let ceilings: Vec<f64> = tps.iter().map(|t| t / 2.0).collect();
    let ratio = paired(&cycles, &ceilings);
    let cycle = Row::new("pg.cycle", "store cycle (PostgreSQL)", "cycles/s", cycles)
        .ratio(ratio, "pgbench/2, per run")
        .goal(">= 0.8 x pgbench/2", ratio >= 0.8);
    results.rows.push(Row::new(
        "pg.pgbench",
        "pgbench simple-update, 1 client",
        "tx/s",
        tps,
    ));
    results.rows.push(cycle);

    let single = claims[0].clone();
    for (procs, samples) in CLAIMERS.iter().zip(claims) {
        let plural = if *procs == 1 { "" } else { "es" };
        let ratio = paired(&samples, &single);
        let mut row = Row::new(
            &format!("pg.claim.{procs}"),
            &format!("claim_ready, {procs} process{plural}"),
            "claims/s",
            samples,
        );
        if *procs > 1 {
            row = row.ratio(ratio, "1 process, per run");
        }
        if *procs == 4 {
            row = row.goal(">= 1.0 x 1 process", ratio >= 1.0);
        }
        results.rows.push(row);
    }
    let total: f64 = double.iter().sum();
    results.rows.push(
        Row::new(
            "pg.claim.double",
            "double claims, 1+2+4 processes",
            "tasks",
            double,
        )
        .goal("0", total == 0.0),
    );
}

/// The median of the run-by-run ratios of `figures` to `baselines`.
fn paired(figures: &[f64], baselines: &[f64]) -> f64 {
    let ratios: Vec<f64> = figures
        .iter()
        .zip(baselines)
        .map(|(figure, baseline)| figure / baseline)
        .collect();
    median(&ratios)
}
