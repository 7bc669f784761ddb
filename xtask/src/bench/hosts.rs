//! `--only hosts`: gateways on separate hosts (network and PID namespaces, the CLI test
//! suite's host rig, so it runs as root) sharing one PostgreSQL board. The throughput of
//! 1, 2 and 3 hosts whose workers only report done (on 2 cores, that hosts do not stall
//! each other: goal >= 1.0 x one host), and the time from a host's death until each task
//! it was running is claimed elsewhere (goal: one lease and one tick).
//!
//! The rig lives in the CLI's tests, so this runs their ignored benchmark
//! (`several_gateways::apart_bench::hosts_bench`) in a release build and reads the line
//! it prints.

use std::process::Command;

use serde_json::Value;

use super::{output, Paths, Results, Row};

const TEST: &str = "several_gateways::apart_bench::hosts_bench";

pub(crate) fn run(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let mut test = Command::new(crate::cargo());
    test.args(["test", "-p", "cli", "--test", "cli"]);
    if !paths.small {
        test.arg("--release");
    }
    test.args(["--", "--ignored", "--exact", TEST, "--nocapture"]);
    if paths.small {
        test.env("KANBAN_BENCH_SMALL", "1");
    }
    let out = output(&mut test)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("HOSTS_BENCH "))
        .ok_or_else(|| format!("{TEST} printed no figures: {text:?}"))?;
    let figures: Value = serde_json::from_str(line).map_err(|e| format!("{TEST} printed {line:?}: {e}"))?;
    let samples = |v: &Value| -> Vec<f64> {
        v.as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let tasks = figures["tasks"].as_u64().unwrap_or_default();
    let one = Row::new(
        "hosts.1",
        &format!("{tasks} tasks, 1 host"),
        "tasks/s",
        samples(&figures["throughput"]["1"]),
    );
    let base = one.median();
    results.rows.push(one);
    for hosts in [2, 3] {
        let row = Row::new(
            &format!("hosts.{hosts}"),
            &format!("{tasks} tasks, {hosts} hosts"),
            "tasks/s",
            samples(&figures["throughput"][hosts.to_string()]),
        );
        let ratio = row.median() / base;
        results
            .rows
            .push(row.ratio(ratio, "1 host").goal(">= 1.0 x 1 host", ratio >= 1.0));
    }
    let lease = figures["lease_seconds"].as_f64().unwrap_or(f64::NAN);
    let tick = figures["tick_seconds"].as_f64().unwrap_or(f64::NAN);
    let row = Row::new(
        "hosts.death",
        &format!("host death -> its tasks claimed elsewhere ({lease} s lease)"),
        "s",
        samples(&figures["death_to_elsewhere"]),
    );
    let bound = lease + tick;
    let pass = row.median() <= bound;
    results
        .rows
        .push(row.goal(&format!("<= lease + tick ({bound} s)"), pass));
    Ok(())
}
