//! The workloads on prebuilt boards: the dispatcher tick and the CLI's latency.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use super::{
    copy_board, example, json_line, mkdir, number, output, path_str, Invocation, Paths, Results, Row,
    BOARD_READY, BOARD_SIZES, BOARD_TRIAGE, CLI_RUNS, CLI_WARMUP, RUNS, TICKS_PER_RUN,
};

/// Builds (or reuses) the tick boards. A board is rebuilt only when the schema version
/// or the board's shape changed, since the 100k one takes a while.
pub(super) fn boards(paths: &Paths) -> Result<(), String> {
    mkdir(&paths.bench.join("boards"))?;
    let shape = |size: usize| {
        format!("tasks {size}, ready {BOARD_READY}, triage {BOARD_TRIAGE} cooling a century, schema ")
    };
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
pub(super) fn home_with_board(paths: &Paths, size: usize, name: &str) -> Result<PathBuf, String> {
    let home = paths.work.join(name);
    if home.exists() {
        std::fs::remove_dir_all(&home).map_err(|e| format!("cannot empty {}: {e}", home.display()))?;
    }
    mkdir(&home)?;
    let board = paths.board(size);
    copy_board(&board, &home.join("kanban.db"))?;
    Ok(home)
}

fn size_name(size: usize) -> String {
    format!("{}k", size / 1000)
}

/// Workers each busy tick claims and starts.
const TICK_SPAWN: usize = 8;

/// Workload 3: one dispatcher tick on boards of 1k, 10k and 100k tasks, idle (nothing
/// due: the read and the plan) and busy (reaping the workers of the tick before, then
/// claiming and starting [`TICK_SPAWN`] workers in a process table that does not fork).
pub(super) fn tick(paths: &Paths, results: &mut Results) -> Result<(), String> {
    boards(paths)?;
    let idle = tick_rows(paths, 0)?;
    let busy = tick_rows(paths, TICK_SPAWN)?;
    results.note(format!(
        "tick: every board has {BOARD_READY} ready and {BOARD_TRIAGE} cooling triage cards, the rest done \
         (so the 1k board holds {} tasks); an idle tick finds nothing due, a busy one reaps the \
         {TICK_SPAWN} workers the tick before started (they completed between the ticks), claims \
         {TICK_SPAWN} ready tasks and starts their workers without forking",
        BOARD_READY + BOARD_TRIAGE
    ));
    results.rows.extend(idle);
    results.rows.extend(busy);
    Ok(())
}

/// The tick rows of one kind: idle (`spawn` 0) or claiming and starting `spawn` workers.
fn tick_rows(paths: &Paths, spawn: usize) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let ticks = TICKS_PER_RUN.to_string();
    let spawn_s = spawn.to_string();
    let (id, label) = match spawn {
        0 => ("tick".to_owned(), "idle tick".to_owned()),
        n => (format!("tick.spawn{n}"), format!("tick starting {n} workers")),
    };
    for size in BOARD_SIZES {
        let mut samples = Vec::new();
        for run in 0..=RUNS {
            let home = home_with_board(paths, size, &format!("tick-{size}"))?;
            let args = [
                "tick",
                "--home",
                path_str(&home)?,
                "--ticks",
                &ticks,
                "--spawn",
                &spawn_s,
            ];
            let figures = example(paths, "bench_tick", &args)?;
            if run > 0 {
                let ms = figures["ticks_ms"]
                    .as_array()
                    .ok_or("bench_tick printed no ticks_ms")?;
                samples.extend(ms.iter().filter_map(Value::as_f64));
            }
        }
        let name = size_name(size);
        rows.push(Row::new(
            &format!("{id}.{name}"),
            &format!("{label}, {name} tasks"),
            "ms",
            samples,
        ));
    }
    if let [small, _, large] = rows.as_mut_slice() {
        // The cost of a tick must not grow with the board: the done tasks are not read.
        let ratio = large.median() / small.median();
        let mut row = large.clone().ratio(ratio, &format!("{label}, 1k tasks"));
        if spawn == 0 {
            row = row.goal("< 5 ms", large.median() < 5.0);
        }
        *large = row.goal("100k/1k < 2", ratio < 2.0);
    }
    Ok(rows)
}

/// Times one whole `kanban` process, after checking it succeeded.
fn timed(cmd: &mut Command) -> Result<f64, String> {
    let started = Instant::now();
    output(cmd)?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// `CLI_RUNS` timings of `run` in ms, after `CLI_WARMUP` untimed ones.
fn sampled(mut run: impl FnMut() -> Result<f64, String>) -> Result<Vec<f64>, String> {
    let mut samples = Vec::new();
    for i in 0..CLI_WARMUP + CLI_RUNS {
        let ms = run()?;
        if i >= CLI_WARMUP {
            samples.push(ms);
        }
    }
    Ok(samples)
}

/// Workload 4: `kanban create`, `list --status ready` and `show ID` on the 100k board.
pub(super) fn cli_latency(paths: &Paths, results: &mut Results) -> Result<(), String> {
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
    let sqlite3_id = id.clone();
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
        let samples = sampled(|| {
            let args = args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            timed(&mut cli(&args))
        })?;
        let row = Row::new(&format!("cli.{key}"), &format!("{label} (100k)"), "ms", samples);
        let pass = row.median() < 5.0;
        results.rows.push(row.goal("< 5 ms", pass));
    }
    // What every command pays before it reads the board: starting the binary and
    // parsing the arguments (docs/cli.md#speed).
    let samples = sampled(|| timed(Command::new(&kanban).arg("--version")))?;
    results.rows.push(Row::new(
        "cli.version",
        "kanban --version (starting alone)",
        "ms",
        samples,
    ));
    show_against_sqlite3(&home, &kanban, &sqlite3_id, results)
}

/// `kanban show ID` against the `sqlite3` CLI reading the same task's row from the same
/// file, in pairs run back to back (each pair in alternating order), so that both see the
/// same disk and page cache: what a one-shot command adds to the database's own cost.
fn show_against_sqlite3(
    home: &std::path::Path,
    kanban: &std::path::Path,
    id: &str,
    results: &mut Results,
) -> Result<(), String> {
    if Command::new("sqlite3").arg("--version").output().is_err() {
        results.note("no sqlite3 CLI: `kanban show` is not timed against it".to_owned());
        return Ok(());
    }
    let db = home.join("kanban.db");
    let query = format!("SELECT * FROM tasks WHERE id = '{id}'");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for i in 0..CLI_WARMUP + CLI_RUNS {
        let mut show = Command::new(kanban);
        show.arg("--home").arg(home).args(["show", id]);
        let mut sqlite3 = Command::new("sqlite3");
        sqlite3.arg(&db).arg(&query);
        let (a, b) = if i % 2 == 0 {
            let a = timed(&mut show)?;
            (a, timed(&mut sqlite3)?)
        } else {
            let b = timed(&mut sqlite3)?;
            (timed(&mut show)?, b)
        };
        if i >= CLI_WARMUP {
            ours.push(a);
            theirs.push(b);
        }
    }
    let baseline = Row::new(
        "cli.show_sqlite3",
        "sqlite3 reading the same row (100k)",
        "ms",
        theirs,
    );
    let ratio = super::median(&ours) / baseline.median();
    let row = Row::new(
        "cli.show_paired",
        "kanban show ID, paired with sqlite3 (100k)",
        "ms",
        ours,
    )
    .ratio(ratio, "sqlite3 reading the same row");
    results.rows.push(baseline);
    results.rows.push(row.goal("<= 1.2x sqlite3", ratio <= 1.2));
    Ok(())
}
