//! `cargo xtask bench --peer`: the store-cycle and CLI workloads run against the Python
//! Hermes kanban (`hermes-agent==0.19.0`, not a project dependency; CI never runs this),
//! on the same machine and in the same invocation as ours, printed as our speed over
//! theirs. A failed install or API discovery is reported with its reason and the other
//! results stand; no figure is ever made up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::Value;

use super::gateway::Running;
use super::outage::{
    outage_length, push_rows, OutageModel, Run, CARDS, OUTAGES, RECOVERY_LIMIT, TICK_SECONDS,
};
use super::{copy_board, json_line, median, mkdir, output, Paths, Results, Row, CLI_RUNS, CLI_WARMUP, RUNS};

const PACKAGE: &str = "hermes-agent==0.19.0";
const PEER_BOARD_TASKS: usize = 100_000;
const PEER_BOARD_READY: usize = 1_000;

/// The driver for the peer's Python API (`hermes_cli.kanban_db`), found by
/// `peer::discover`. Each call prints one JSON line, like our examples.
const DRIVER: &str = r#"
import json, os, sys, time
from pathlib import Path
from hermes_cli import kanban_db as kb

def connect(home):
    return kb.connect(db_path=Path(home) / "kanban.db")

def cycle(home, n, seconds):
    conn = connect(home)
    # Setup is not measured: create the ready tasks without fsyncs, then back to the
    # peer's own FULL for the timed part.
    conn.execute("PRAGMA synchronous=OFF")
    ids = [kb.create_task(conn, title=f"bench task {i}") for i in range(n)]
    conn.execute("PRAGMA synchronous=FULL")
    done = errors = 0
    started = time.perf_counter()
    for task_id in ids:
        if time.perf_counter() - started >= seconds:
            break
        try:
            if kb.claim_task(conn, task_id) is None or not kb.complete_task(conn, task_id, result="done"):
                errors += 1
                continue
        except Exception:
            errors += 1
            continue
        done += 1
    elapsed = time.perf_counter() - started
    print(json.dumps({"cycles": done, "seconds": elapsed, "cycles_per_sec": done / elapsed, "errors": errors}))

def build(home, total, ready):
    conn = connect(home)
    conn.execute("PRAGMA synchronous=OFF")
    started = time.perf_counter()
    for i in range(total - ready):
        kb.create_task(conn, title=f"finished work {i}")
    # Marking them done through complete_task would take minutes of Python; the rows
    # only need to be there, done, for the CLI to read past.
    conn.execute("UPDATE tasks SET status = 'done'")
    for i in range(ready):
        kb.create_task(conn, title=f"waiting work {i}")
    conn.close()
    print(json.dumps({"seconds": time.perf_counter() - started}))

def outage(home, base_url, cards, tick, seconds):
    # The Hermes gateway's auto-decompose tick (gateway/kanban_watchers.py) with its
    # defaults: up to kanban.auto_decompose_per_tick (3) triage cards per tick, the
    # interval slept between ticks.
    Path(home, "config.yaml").write_text(
        "auxiliary:\n  kanban_decomposer:\n    provider: custom\n    model: bench-model\n"
        f"    base_url: {base_url}\n    api_key: sk-bench-not-a-key\n")
    from hermes_cli import kanban_decompose as dec
    with kb.connect_closing() as conn:
        for i in range(cards):
            kb.create_task(conn, title=f"rough idea {i}", triage=True)
    print(json.dumps({"created": cards}), flush=True)
    started = time.time()
    ticks = 0
    emptied = first = None
    while time.time() - started < seconds:
        ids = dec.list_triage_ids()
        if not ids:
            emptied = time.time()
            break
        for tid in ids[:3]:
            try:
                dec.decompose_task(tid, author="auto-decomposer")
            except Exception:
                pass
            if first is None and len(dec.list_triage_ids()) < cards:
                first = time.time()
        ticks += 1
        time.sleep(tick)
    print(json.dumps({"ticks": ticks, "emptied_at": emptied, "first_at": first, "now": time.time()}), flush=True)

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "discover":
        print(json.dumps({"module": kb.__file__, "db": str(kb.kanban_db_path()),
                          "api": [f for f in ("connect", "create_task", "claim_task", "complete_task") if hasattr(kb, f)]}))
    elif what == "cycle":
        cycle(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif what == "outage":
        outage(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
    elif what == "build":
        build(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
"#;

struct Peer {
    python: PathBuf,
    hermes: PathBuf,
    driver: PathBuf,
}

impl Peer {
    /// The peer's Python with its kanban home pointed at `home`.
    fn python(&self, home: &Path) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.driver)
            .env("HERMES_KANBAN_HOME", home)
            .env("HERMES_HOME", home);
        cmd
    }

    fn hermes(&self, home: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.hermes);
        cmd.arg("kanban")
            .args(args)
            .env("HERMES_KANBAN_HOME", home)
            .env("HERMES_HOME", home);
        cmd
    }
}

/// The peer's side of each selected workload that has one (`store`, `cli`, `outage`).
pub(crate) fn run(paths: &Paths, results: &mut Results, selected: &[&str]) {
    let peer = match install(paths).and_then(|p| discover(paths, p)) {
        Ok(p) => p,
        Err(e) => {
            results.note(format!("peer: not measured: {e}"));
            return;
        }
    };
    let workloads: [(&str, &str, PeerWorkload); 3] = [
        ("store", "store cycle", store_cycle),
        ("cli", "CLI", cli),
        ("outage", "outage cost", outage),
    ];
    for (key, name, workload) in workloads {
        if selected.contains(&key) {
            if let Err(e) = workload(paths, &peer, results) {
                results.note(format!("peer {name}: not measured: {e}"));
            }
        }
    }
}

type PeerWorkload = fn(&Paths, &Peer, &mut Results) -> Result<(), String>;

/// The Hermes gateway's auto-decompose tick through the same outages as ours
/// (`outage.rs`), driven by the peer's own decomposer, with our requests over theirs.
fn outage(paths: &Paths, peer: &Peer, results: &mut Results) -> Result<(), String> {
    for (scale, bases) in OUTAGES {
        let run = peer_through(paths, peer, scale, outage_length(bases))?;
        push_rows(results, "peer.", "peer: ", scale, &run);
        let theirs = run.during.during as f64;
        if theirs == 0.0 {
            results.note(format!("peer: no request during the {scale} outage: no ratio"));
            continue;
        }
        if let Some(ours) = results.get(&format!("outage.{scale}.requests")).cloned() {
            let ratio = ours.median() / theirs;
            results.rows.push(
                Row::new(
                    &format!("outage.{scale}.requests.vs_peer"),
                    &format!("outage {scale} base: our requests / the peer's"),
                    "x",
                    vec![ratio],
                )
                .goal("<= 1: an outage costs no more than on the peer", ratio <= 1.0),
            );
        }
    }
    Ok(())
}

fn peer_through(paths: &Paths, peer: &Peer, scale: &str, length: Duration) -> Result<Run, String> {
    let home = paths.work.join(format!("peer-outage-{scale}"));
    let _ = std::fs::remove_dir_all(&home);
    mkdir(&home)?;
    let mut model = OutageModel::start(paths, length)?;
    let seconds = (length + RECOVERY_LIMIT).as_secs().to_string();
    let mut driver = Running::spawn(
        peer.python(&home)
            .arg("outage")
            .arg(&home)
            .args([
                &model.base_url,
                &CARDS.to_string(),
                &TICK_SECONDS.to_string(),
                &seconds,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )?;
    let mut lines = BufReader::new(
        driver
            .child_mut()
            .stdout
            .take()
            .ok_or("the driver has no stdout")?,
    )
    .lines();
    let mut next = || -> Result<Value, String> {
        let line = lines
            .next()
            .ok_or("the driver stopped early")?
            .map_err(|e| format!("reading the driver: {e}"))?;
        serde_json::from_str(&line).map_err(|e| format!("the driver printed {line:?}: {e}"))
    };
    next()?;
    model.wait_for_recovery();
    let during = model.counts()?;
    let end_line = next()?;
    let end = model.counts()?;
    // Seconds from the model's recovery to a moment the driver noted.
    let since_healed = model.healed_at.elapsed().as_secs_f64();
    let now = end_line["now"].as_f64();
    let after_healing = |key: &str| match (end_line[key].as_f64(), now) {
        (Some(at), Some(now)) => Some(since_healed - (now - at)),
        _ => None,
    };
    Ok(Run {
        during,
        end,
        // The peer has no parking: a card whose decomposition failed stays in triage.
        parked: 0,
        first: after_healing("first_at"),
        all: after_healing("emptied_at"),
    })
}

fn install(paths: &Paths) -> Result<(PathBuf, PathBuf), String> {
    let venv = paths.bench.join("peer-venv");
    let bin = venv.join("bin");
    let (python, pip, hermes) = (bin.join("python"), bin.join("pip"), bin.join("hermes"));
    if !python.exists() {
        output(Command::new("python3").args(["-m", "venv"]).arg(&venv))
            .map_err(|e| format!("cannot create the virtualenv {}: {e}", venv.display()))?;
    }
    let installed = output(Command::new(&pip).args(["show", "hermes-agent"]))
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("Version: 0.19.0"))
        .unwrap_or(false);
    if !installed {
        output(Command::new(&pip).args(["install", "--quiet", PACKAGE]))
            .map_err(|e| format!("pip install {PACKAGE} failed: {e}"))?;
    }
    if !hermes.exists() {
        return Err(format!(
            "{PACKAGE} installed no `hermes` command in {}",
            bin.display()
        ));
    }
    Ok((python, hermes))
}

/// Checks that the installed package has the kanban API the driver uses.
fn discover(paths: &Paths, (python, hermes): (PathBuf, PathBuf)) -> Result<Peer, String> {
    let dir = paths.bench.join("peer");
    mkdir(&dir)?;
    let driver = dir.join("driver.py");
    std::fs::write(&driver, DRIVER).map_err(|e| format!("{}: {e}", driver.display()))?;
    let peer = Peer {
        python,
        hermes,
        driver,
    };
    let probe = paths.work.join("peer-probe");
    mkdir(&probe)?;
    let found = json_line(
        &output(peer.python(&probe).arg("discover"))
            .map_err(|e| format!("no kanban Python API found (expected hermes_cli.kanban_db): {e}"))?,
    )?;
    let api = found["api"].as_array().map_or(0, Vec::len);
    if api < 4 {
        return Err(format!(
            "hermes_cli.kanban_db lacks connect/create_task/claim_task/complete_task: {found}"
        ));
    }
    eprintln!("xtask: bench: peer API {}", found["module"]);
    output(&mut peer.hermes(&probe, &["--help"])).map_err(|e| format!("no `hermes kanban` CLI: {e}"))?;
    Ok(peer)
}

fn store_cycle(paths: &Paths, peer: &Peer, results: &mut Results) -> Result<(), String> {
    let mut samples = Vec::new();
    for run in 0..=RUNS {
        let home = paths.work.join("peer-cycle");
        let _ = std::fs::remove_dir_all(&home);
        mkdir(&home)?;
        let figures = json_line(&output(
            peer.python(&home).arg("cycle").arg(&home).args(["2000", "1.0"]),
        )?)?;
        if figures["errors"].as_u64().unwrap_or(0) > 0 {
            results.note(format!("peer store cycle: errors in run {run}: {figures}"));
        }
        if run > 0 {
            samples.push(
                figures["cycles_per_sec"]
                    .as_f64()
                    .ok_or("driver printed no cycles_per_sec")?,
            );
        }
    }
    let row = Row::new(
        "peer.store.cycle",
        "peer: Python store cycle (FULL)",
        "cycles/s",
        samples,
    );
    let theirs = row.median();
    results.rows.push(row);
    for (id, shown) in [("store.cycle.full", "FULL"), ("store.cycle.normal", "NORMAL")] {
        if let Some(ours) = results.get(id).cloned() {
            let samples = ours.samples.iter().map(|v| v / theirs).collect();
            let row = Row::new(
                &format!("peer.x.{id}"),
                &format!("ours ({shown}) / peer cycle"),
                "x",
                samples,
            );
            results
                .rows
                .push(row.ratio(ours.median() / theirs, "peer cycle (FULL)"));
        }
    }
    Ok(())
}

fn cli(paths: &Paths, peer: &Peer, results: &mut Results) -> Result<(), String> {
    let cached = paths.bench.join("peer").join("board-100k");
    let stamp = cached.join("stamp");
    let wanted = format!("{PACKAGE} tasks {PEER_BOARD_TASKS} ready {PEER_BOARD_READY}");
    if std::fs::read_to_string(&stamp).unwrap_or_default().trim() != wanted {
        let _ = std::fs::remove_dir_all(&cached);
        mkdir(&cached)?;
        eprintln!("xtask: bench: building the peer's 100k board (once; takes a minute or two)");
        let total = PEER_BOARD_TASKS.to_string();
        let ready = PEER_BOARD_READY.to_string();
        output(
            peer.python(&cached)
                .arg("build")
                .arg(&cached)
                .args([&total, &ready]),
        )?;
        std::fs::write(&stamp, &wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    results.note(
        "peer CLI: the peer's 99k done tasks were marked done by one SQL UPDATE (no runs or \
         completion events), a lighter board than ours"
            .to_owned(),
    );
    let home = paths.work.join("peer-cli");
    let _ = std::fs::remove_dir_all(&home);
    mkdir(&home)?;
    copy_board(&cached.join("kanban.db"), &home.join("kanban.db"))?;
    let listed = json_line(&output(
        &mut peer.hermes(&home, &["list", "--status", "ready", "--json"]),
    )?)?;
    let id = listed
        .as_array()
        .and_then(|a| a.first())
        .and_then(|t| t["id"].as_str())
        .ok_or_else(|| format!("`hermes kanban list --json` printed no task id: {listed:.200}"))?
        .to_owned();
    let verbs: [(&str, Vec<String>); 3] = [
        ("create", vec!["create".into(), "bench create".into()]),
        ("list", vec!["list".into(), "--status".into(), "ready".into()]),
        ("show", vec!["show".into(), id]),
    ];
    for (key, args) in verbs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut samples = Vec::new();
        for i in 0..CLI_WARMUP + CLI_RUNS {
            let started = Instant::now();
            output(&mut peer.hermes(&home, &args))?;
            if i >= CLI_WARMUP {
                samples.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        let theirs = median(&samples);
        results.rows.push(Row::new(
            &format!("peer.cli.{key}"),
            &format!("peer: hermes kanban {key} (100k)"),
            "ms",
            samples,
        ));
        if let Some(ours) = results.get(&format!("cli.{key}")).cloned() {
            let samples = ours.samples.iter().map(|v| theirs / v).collect();
            let row = Row::new(
                &format!("peer.x.cli.{key}"),
                &format!("ours / peer: {key} speed"),
                "x",
                samples,
            );
            results
                .rows
                .push(row.ratio(theirs / ours.median(), &format!("peer {key}")));
        }
    }
    Ok(())
}
