//! Workload: lanes (docs/lanes.md), agents pulling work from `kanban serve` over HTTP
//! (`crates/web/examples/bench_lanes.rs`): claim -> complete throughput with 1, 4 and 16
//! lanes against the same cycle on the store in one process, ready -> claimed by a
//! waiting lane against the `kanban create` that made the task ready, and the server's
//! memory with 1,000 lanes waiting against the server idle.

use serde_json::Value;

use super::{median, mkdir, output, served_example, show, Paths, Results, Row, RUNS};

fn samples(figures: &Value, key: &str) -> Result<Vec<f64>, String> {
    figures
        .pointer(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .ok_or_else(|| format!("bench_lanes printed no {key}"))
}

/// The `q` quantile (0 to 1) of `samples`, nearest rank.
fn quantile(samples: &[f64], q: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied().unwrap_or(f64::NAN)
}

pub(super) fn run(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let home = paths.work.join("lanes");
    mkdir(&home)?;
    output(
        std::process::Command::new(paths.kanban())
            .arg("--home")
            .arg(&home)
            .arg("init"),
    )?;
    let runs = if paths.small { 1 } else { RUNS };
    let figures = served_example(paths, "bench_lanes", &home, runs)?;
    let cycle = Row::new(
        "lanes.store_cycle",
        "lane cycle on the store, in process",
        "tasks/s",
        samples(&figures, "/store_cycle_per_s")?,
    );
    for n in ["1", "4", "16"] {
        let row = Row::new(
            &format!("lanes.http.{n}"),
            &format!("{n} HTTP lane(s): claim, complete"),
            "tasks/s",
            samples(&figures, &format!("/throughput_per_s/{n}"))?,
        );
        let ratio = row.median() / cycle.median();
        results
            .rows
            .push(row.ratio(ratio, "the store's cycle in process"));
    }
    results.rows.push(cycle);
    latency(&figures, results)?;
    memory(&figures, results)
}

/// Ready -> claimed by a waiting lane, p50 and p99, against `kanban create` alone.
fn latency(figures: &Value, results: &mut Results) -> Result<(), String> {
    let ready = samples(figures, "/ready_to_claimed_ms")?;
    let create = Row::new(
        "lanes.create",
        "kanban create (makes it ready)",
        "ms",
        samples(figures, "/create_ms")?,
    );
    let p50 = Row::new(
        "lanes.ready_to_claimed.p50",
        "waiting lane: ready -> claimed p50",
        "ms",
        vec![quantile(&ready, 0.5)],
    );
    let p99 = Row::new(
        "lanes.ready_to_claimed.p99",
        "waiting lane: ready -> claimed p99",
        "ms",
        vec![quantile(&ready, 0.99)],
    );
    let pass = p50.median() < 50.0;
    let (r50, r99) = (p50.median() / create.median(), p99.median() / create.median());
    results
        .rows
        .push(p50.ratio(r50, "kanban create").goal("< 50 ms", pass));
    results.rows.push(p99.ratio(r99, "kanban create"));
    results.note(format!(
        "lanes: the HTTP lanes do no work between claim and complete, each on its own \
         keep-alive connection; ready -> claimed is timed from the start of the `kanban create` that makes the \
         task ready to the waiting claim's answer ({} rounds; the create alone takes {} ms at the median)",
        ready.len(),
        show(median(&create.samples))
    ));
    results.rows.push(create);
    Ok(())
}

/// The server's memory with 1,000 lanes waiting, against the server idle.
fn memory(figures: &Value, results: &mut Results) -> Result<(), String> {
    let number = |key: &str| {
        figures[key]
            .as_f64()
            .ok_or_else(|| format!("bench_lanes printed no {key}"))
    };
    let waiting = figures["waiting"]
        .as_u64()
        .ok_or("bench_lanes printed no waiting")?;
    let idle = Row::new(
        "lanes.rss.idle",
        "serve RSS, idle",
        "MiB",
        vec![number("rss_idle_mib")?],
    );
    let busy = Row::new(
        "lanes.rss.waiting",
        &format!("serve RSS, {waiting} lanes waiting"),
        "MiB",
        vec![number("rss_waiting_mib")?],
    );
    let pass = busy.median() < 50.0;
    let ratio = busy.median() / idle.median();
    results
        .rows
        .push(busy.ratio(ratio, "serve RSS, idle").goal("< 50 MiB", pass));
    results.rows.push(idle);
    Ok(())
}
