//! `cargo xtask bench --scale 1m`: the everyday commands on boards of 1k, 100k and 1M
//! tasks (five events a task), each timed with its peak memory, with the ratios against
//! the smaller boards in the same run (issue 19). The boards are written once by the
//! `bench_scale` example (direct SQL in one transaction) under `target/bench/scale/`
//! and reused until the schema changes; every measurement runs on a copy.
//! `kanban gc` runs beside a writer claiming and completing ready tasks, and the slowest
//! of those completes is its own row (issue 19: never blocked over 100 ms).
//! `--scale 10k` (1k and 10k boards) checks the harness quickly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::{copy_board, example, mkdir, output, path_str, Paths, Results, Row};

const EVENTS_PER_TASK: usize = 5;
const READY: usize = 1_000;
/// Timed runs per command, after one discarded.
const SCALE_RUNS: usize = 3;

/// The board sizes of a scale.
pub(super) fn sizes(scale: &str) -> Result<Vec<usize>, String> {
    match scale {
        "1m" => Ok(vec![1_000, 100_000, 1_000_000]),
        "10k" => Ok(vec![1_000, 10_000]),
        other => Err(format!("bench: no scale {other:?} (expected 1m)")),
    }
}

fn name(size: usize) -> String {
    match size {
        s if s >= 1_000_000 => format!("{}m", s / 1_000_000),
        s => format!("{}k", s / 1000),
    }
}

/// Builds (or reuses) the board of `size` tasks; a tenth of them archived.
fn board(paths: &Paths, size: usize) -> Result<PathBuf, String> {
    let dir = paths.bench.join("scale");
    mkdir(&dir)?;
    let db = dir.join(format!("board-{}.db", name(size)));
    let stamp = db.with_extension("stamp");
    let version = example(paths, "bench_tick", &["version"])?;
    let wanted = format!(
        "tasks {size}, events {EVENTS_PER_TASK}, ready {READY}, schema {}",
        version["schema_version"]
    );
    if db.exists() && std::fs::read_to_string(&stamp).unwrap_or_default().trim() == wanted {
        return Ok(db);
    }
    for stale in [
        db.clone(),
        db.with_extension("db-wal"),
        db.with_extension("db-shm"),
    ] {
        let _ = std::fs::remove_file(stale);
    }
    eprintln!(
        "xtask: bench: building the {} board (once; reused until the schema changes)",
        name(size)
    );
    let (tasks, events, ready, archived) = (
        size.to_string(),
        EVENTS_PER_TASK.to_string(),
        READY.min(size / 2).to_string(),
        (size / 10).to_string(),
    );
    let args = [
        "build",
        "--db",
        path_str(&db)?,
        "--tasks",
        &tasks,
        "--events-per-task",
        &events,
        "--ready",
        &ready,
        "--archived",
        &archived,
    ];
    let built = example(paths, "bench_scale", &args)?;
    eprintln!("xtask: bench: built {built}");
    std::fs::write(&stamp, wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(db)
}

/// A fresh home holding a copy of the board.
fn home(paths: &Paths, db: &Path, size: usize) -> Result<PathBuf, String> {
    let home = paths.work.join(format!("scale-{}", name(size)));
    if home.exists() {
        std::fs::remove_dir_all(&home).map_err(|e| format!("cannot empty {}: {e}", home.display()))?;
    }
    mkdir(&home)?;
    copy_board(db, &home.join("kanban.db"))?;
    Ok(home)
}

/// Runs `program args` under `/usr/bin/time`: its wall time in ms and peak RSS in MB.
fn measured(program: &Path, args: &[String]) -> Result<(f64, f64), String> {
    let (ms, mb, _) = timed(program, args, std::process::Stdio::null())?;
    Ok((ms, mb))
}

/// `program args` run `SCALE_RUNS` times after one discarded: its wall times in ms and
/// peak RSS in MB.
fn repeated(program: &Path, args: &[String]) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (mut times, mut rss) = (Vec::new(), Vec::new());
    for run in 0..=SCALE_RUNS {
        let (ms, mb) = measured(program, args)?;
        if run > 0 {
            times.push(ms);
            rss.push(mb);
        }
    }
    Ok((times, rss))
}

/// `program args` under `/usr/bin/time`: its wall time in ms, peak RSS in MB and stdout
/// (empty unless `stdout` is piped).
fn timed(
    program: &Path,
    args: &[String],
    stdout: std::process::Stdio,
) -> Result<(f64, f64, Vec<u8>), String> {
    let started = Instant::now();
    let out = output(
        Command::new("/usr/bin/time")
            .args(["-f", "peak_rss_kb %M"])
            .arg(program)
            .args(args)
            .stdout(stdout),
    )?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let stderr = String::from_utf8_lossy(&out.stderr);
    Ok((ms, peak_mb(&stderr)?, out.stdout))
}

/// The peak RSS in MB that `/usr/bin/time -f "peak_rss_kb %M"` wrote last.
fn peak_mb(stderr: &str) -> Result<f64, String> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("peak_rss_kb "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .ok_or_else(|| format!("no peak RSS from /usr/bin/time: {stderr}"))
}

/// The commands timed on every board: (key, label, arguments after `--home H`).
fn commands(ready_id: &str) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        ("create", "kanban create", words(&["create", "scale bench"])),
        ("show", "kanban show ID", words(&["show", ready_id])),
        (
            "list_ready",
            "kanban list --status ready",
            words(&["list", "--status", "ready"]),
        ),
        (
            "list_json",
            "kanban list --json (all)",
            words(&["list", "--json", "--archived"]),
        ),
        (
            "list_jsonl",
            "kanban list --jsonl (all)",
            words(&["list", "--jsonl", "--archived"]),
        ),
        ("stats", "kanban stats", words(&["stats"])),
        ("events", "kanban events (newest 100)", words(&["events"])),
    ]
}

/// The claim order of a whole listing, as SQL.
const CLAIM_ORDER: &str = "ORDER BY priority DESC, created_at, rowid";

/// SQLite's own shell on the board of `home`: `options`, then `sql`, timed as a command.
fn sqlite3(home: &Path, (key, label): (&str, &str), options: &[&str], sql: &str) -> Result<Measured, String> {
    let db = home.join("kanban.db");
    let mut args: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
    args.extend([path_str(&db)?.to_owned(), sql.to_owned()]);
    let (times, rss) = repeated(Path::new("sqlite3"), &args)?;
    Ok((key.to_owned(), label.to_owned(), times, rss))
}

/// The limit of `list --json` on this machine: SQLite's own shell dumping the same rows,
/// every column, in the same order, as JSON (`sqlite3 -json`).
fn sqlite_json(home: &Path) -> Result<Measured, String> {
    sqlite3(
        home,
        ("sqlite_json", "sqlite3 -json, the same rows (the limit)"),
        &["-json"],
        &format!("SELECT * FROM tasks {CLAIM_ORDER}"),
    )
}

/// The floors under any listing in claim order: SQLite visiting the same rows in the same
/// order, each read from the table, with `kanban`'s page cache and no output at all,
/// reading one column, then every column (a listing yields them all): key, label, the
/// columns read.
const VISITS: [(&str, &str, &str); 2] = [
    (
        "sqlite_visit",
        "SQLite visiting the same rows in claim order, no output (the floor)",
        "title",
    ),
    (
        "sqlite_visit_all",
        "SQLite visiting the same rows in claim order, every column, no output",
        "*",
    ),
];

/// One of [`VISITS`] on the board of `home`.
fn sqlite_visit(home: &Path, (key, label, columns): (&str, &str, &str)) -> Result<Measured, String> {
    sqlite3(
        home,
        (key, label),
        &["-cmd", "PRAGMA cache_size = -8192"],
        // LIMIT -1 keeps the ordered scan a subquery of its own: every row is visited.
        &format!("SELECT count({columns}) FROM (SELECT {columns} FROM tasks {CLAIM_ORDER} LIMIT -1)"),
    )
}

/// Whether a row is SQLite's own shell's: a limit beside the board's commands, with no
/// goal of its own.
fn sqlite_row(key: &str) -> bool {
    key == "sqlite_json" || VISITS.iter().any(|(visit, ..)| *visit == key)
}

/// One command on one board: key, label, times in ms, peak RSS in MB.
type Measured = (String, String, Vec<f64>, Vec<f64>);

/// The dispatcher tick on the board of `home`: the ticks' own times, timed by the
/// dispatcher's process on one connection after a warm-up tick, as a gateway ticks; the
/// peak RSS is the process's.
fn tick_row(paths: &Paths, home: &Path) -> Result<Measured, String> {
    let tick = paths.examples.join("bench_tick");
    let args = [
        "tick".to_owned(),
        "--home".to_owned(),
        path_str(home)?.to_owned(),
        "--ticks".to_owned(),
        "100".to_owned(),
    ];
    let (_, mb, stdout) = timed(&tick, &args, std::process::Stdio::piped())?;
    let ticks = serde_json::from_slice::<serde_json::Value>(&stdout)
        .ok()
        .and_then(|v| v["ticks_ms"].as_array().cloned())
        .ok_or_else(|| {
            format!(
                "bench_tick printed no ticks_ms: {}",
                String::from_utf8_lossy(&stdout)
            )
        })?;
    let ticks: Vec<f64> = ticks.iter().filter_map(serde_json::Value::as_f64).collect();
    Ok((
        "tick".to_owned(),
        format!("dispatcher tick (median of {})", ticks.len()),
        ticks,
        vec![mb],
    ))
}

/// One size: every command `SCALE_RUNS` times, then the tick, then one `gc`.
fn measure_size(paths: &Paths, size: usize) -> Result<Vec<Measured>, String> {
    let db = board(paths, size)?;
    let home = home(paths, &db, size)?;
    let kanban = paths.kanban();
    let with_home = |args: &[String]| {
        let mut all = vec![
            "--home".to_owned(),
            path_str(&home).map(str::to_owned).unwrap_or_default(),
        ];
        all.extend_from_slice(args);
        all
    };
    let listed = output(Command::new(&kanban).args(with_home(&[
        "list".into(),
        "--status".into(),
        "ready".into(),
        "--limit".into(),
        "1".into(),
        "--jsonl".into(),
    ])))?;
    let first: serde_json::Value =
        serde_json::from_slice(&listed.stdout).map_err(|e| format!("list --jsonl: {e}"))?;
    let ready_id = first["id"].as_str().ok_or("no ready task")?.to_owned();
    let mut rows = Vec::new();
    for (key, label, args) in commands(&ready_id) {
        let (times, rss) = repeated(&kanban, &with_home(&args))?;
        rows.push((key.to_owned(), label.to_owned(), times, rss));
    }
    rows.push(sqlite_json(&home)?);
    for visit in VISITS {
        rows.push(sqlite_visit(&home, visit)?);
    }
    rows.push(tick_row(paths, &home)?);
    let gc = ["gc", "--archived-older-than", "30d", "--events-older-than", "30d"].map(str::to_owned);
    let (ms, mb, completes) = gc_beside_writer(&kanban, &with_home(&gc), &with_home)?;
    rows.push((
        "gc".to_owned(),
        "kanban gc (30d, 30d)".to_owned(),
        vec![ms],
        vec![mb],
    ));
    if !completes.is_empty() {
        let slowest = completes.iter().copied().fold(0.0, f64::max);
        rows.push((
            "gc_write".to_owned(),
            "kanban complete during gc (slowest)".to_owned(),
            vec![slowest],
            vec![],
        ));
    }
    Ok(rows)
}

/// Runs `gc` (as `measured` does) while claiming ready tasks and timing each one's
/// `kanban complete`, a writer beside the batches: gc's time in ms, its peak RSS in MB,
/// and the time of every complete that ran while it did.
fn gc_beside_writer(
    kanban: &Path,
    gc: &[String],
    with_home: &dyn Fn(&[String]) -> Vec<String>,
) -> Result<(f64, f64, Vec<f64>), String> {
    let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let listed = output(Command::new(kanban).args(with_home(&words(&[
        "list", "--status", "ready", "--limit", "500", "--jsonl",
    ]))))?;
    let mut ready = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect::<Vec<_>>()
        .into_iter();
    let started = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "peak_rss_kb %M"])
        .arg(kanban)
        .args(gc)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run gc: {e}"))?;
    let mut completes = Vec::new();
    while child
        .try_wait()
        .map_err(|e| format!("waiting for gc: {e}"))?
        .is_none()
    {
        let Some(id) = ready.next() else { break };
        let claimed = output(Command::new(kanban).args(with_home(&words(&["claim", &id, "--json"]))))?;
        let claim: serde_json::Value =
            serde_json::from_slice(&claimed.stdout).map_err(|e| format!("claim --json: {e}"))?;
        let run = claim["run_id"].to_string();
        let at = Instant::now();
        output(Command::new(kanban).args(with_home(&words(&["complete", &id, "--run", &run]))))?;
        completes.push(at.elapsed().as_secs_f64() * 1e3);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for gc: {e}"))?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("gc failed ({}): {}", out.status, stderr.trim()));
    }
    Ok((ms, peak_mb(&stderr)?, completes))
}

/// Adds the rows of every size, the largest with its ratios against the smaller.
pub(super) fn run(paths: &Paths, results: &mut Results, scale: &str) -> Result<(), String> {
    let sizes = sizes(scale)?;
    let mut by_size = Vec::new();
    for size in &sizes {
        eprintln!("xtask: bench: scale {} ...", name(*size));
        by_size.push((*size, measure_size(paths, *size)?));
    }
    let smallest = &by_size[0].1;
    for (size, rows) in &by_size {
        for (key, label, times, rss) in rows {
            let n = name(*size);
            let mut row = Row::new(
                &format!("scale.{key}.{n}"),
                &format!("{label}, {n}"),
                "ms",
                times.clone(),
            );
            if key == "gc_write" {
                let pass = row.median() < 100.0;
                results.rows.push(row.goal("< 100 ms", pass));
                continue;
            }
            let base = smallest.iter().find(|r| &r.0 == key).map(|r| super::median(&r.2));
            if let (Some(base), true) = (base, *size != sizes[0]) {
                let ratio = row.median() / base;
                row = row.ratio(ratio, &format!("{n}/{}", name(sizes[0])));
                let whole_board = matches!(key.as_str(), "list_json" | "list_jsonl" | "gc");
                if !whole_board && !sqlite_row(key) {
                    row = row.goal("within 1.5x of 1k", ratio <= 1.5);
                }
            }
            results.rows.push(row);
            let peak = Row::new(
                &format!("scale.{key}.{n}.rss"),
                &format!("{label}, {n}: peak RSS"),
                "MB",
                rss.clone(),
            );
            let pass = peak.median() < 30.0;
            results.rows.push(if key == "tick" || sqlite_row(key) {
                peak
            } else {
                peak.goal("< 30 MB", pass)
            });
        }
        rate_rows(results, *size, rows);
    }
    Ok(())
}

/// The listing's rows per second on the board of `size`, beside the floor's and with
/// their ratio to `sqlite3 -json`'s.
fn rate_rows(results: &mut Results, size: usize, rows: &[Measured]) {
    let rate = |key: &str| {
        rows.iter()
            .find(|(k, ..)| k == key)
            .map(|(_, _, times, _)| size as f64 / (super::median(times) / 1e3))
    };
    let limit = rate("sqlite_json");
    for (key, label, _) in VISITS {
        if let Some(visited) = rate(key) {
            results.rows.push(Row::new(
                &format!("scale.{key}_rate.{}", name(size)),
                &format!("{label}: rows/s, {}", name(size)),
                "rows/s",
                vec![visited],
            ));
        }
    }
    for (key, label) in [("list_json", "list --json"), ("list_jsonl", "list --jsonl")] {
        let Some(rows_per_s) = rate(key) else { continue };
        let mut row = Row::new(
            &format!("scale.{key}_rate.{}", name(size)),
            &format!("{label} rows/s, {}", name(size)),
            "rows/s",
            vec![rows_per_s],
        );
        if let Some(limit) = limit {
            row = row.ratio(rows_per_s / limit, "sqlite3 -json's rows/s");
        }
        results
            .rows
            .push(row.goal(">= 500k rows/s", rows_per_s >= 500_000.0));
    }
}
