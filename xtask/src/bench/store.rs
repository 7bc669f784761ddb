//! The SQLite store workloads: the claim-complete cycle against raw SQLite, and contending
//! processes.

use super::{example, number, path_str, Paths, Results, Row, RUNS, STORE_SECONDS};

/// Workload 1: claim -> complete through the `Store` API against the raw rate of
/// one-row write transactions, FULL and NORMAL, interleaved run by run so a busy
/// moment of the machine hits the figure and its baseline alike.
pub(super) fn store_cycle(paths: &Paths, results: &mut Results) -> Result<(), String> {
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
            "full" => row.goal(">= 0.9 x raw/2", ratio >= 0.9),
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
pub(super) fn contention(paths: &Paths, results: &mut Results) -> Result<(), String> {
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
