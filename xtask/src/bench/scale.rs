//! The scale-out rows of `cargo xtask bench --only scale` (issues 13 and 38):
//!
//! - the dispatcher tick on a 100k-task PostgreSQL board (the tick workload's board,
//!   moved there with `kanban migrate`): goal under 5 ms median;
//! - the whole loop (claim, spawn, a worker that only completes, the next claim) with
//!   trivial workers (`kanban complete`), `max_spawn: 8` and a 1 s tick: tasks/s on
//!   SQLite (goal at least 500) against what the process a worker is costs alone here
//!   (`kanban --version`, 8 at a time), with the CPU time the machine spent per task
//!   meanwhile and the rate that cost allows with every core busy (the loop's ceiling,
//!   whatever order the gateway works in), and with 1, 2 and 4 gateway processes sharing
//!   one PostgreSQL board, interleaved run by run (4 at least as fast as 1, the median
//!   of the runs' ratios; every task claimed once);
//! - ready to spawned: from the start of `kanban create` to the worker's first
//!   instruction (it writes the time), with a 30 s tick so only a wake-up can be that
//!   fast, each task made once the one before is done; p50 (goal under 10 ms on SQLite,
//!   20 ms on PostgreSQL) and p99, on both backends, against what no gateway can beat:
//!   `kanban create` alone plus the worker's own start to its first instruction
//!   (measured beside it, with a bare `fork`+`exec`+`wait` of `/bin/true`).
//!
//! The PostgreSQL rows run on `KANBAN_TEST_DATABASE_URL`, each in a schema of its own
//! (made and dropped with `psql`); an unreachable server skips them with a note.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::board::{boards, home_with_board};
use super::gateway::{new_home, populate, Running, Spent};
use super::limits::{busy_seconds, cores, processes_alone, unix_nanos, Parts};
use super::{example, json_line, median, mkdir, output, path_str, Paths, Results, Row, RUNS};
use crate::pg::{Server, HINT};

const TICK_SIZE: usize = 100_000;
const TICKS: &str = "20";
const LOOP_TASKS: usize = 1_000;
const LATENCY_RUNS: usize = 50;
const GATEWAYS: [usize; 3] = [1, 2, 4];
const MAX_SPAWN: usize = 8;
const LOOP_LIMIT: Duration = Duration::from_secs(600);

/// The figures at the scale of a release run, or of a `--debug` check.
struct Scale {
    tick_size: usize,
    loop_tasks: usize,
    latency_runs: usize,
    runs: usize,
}

impl Scale {
    fn of(paths: &Paths) -> Scale {
        match paths.small {
            false => Scale {
                tick_size: TICK_SIZE,
                loop_tasks: LOOP_TASKS,
                latency_runs: LATENCY_RUNS,
                runs: RUNS,
            },
            true => Scale {
                tick_size: 500,
                loop_tasks: 24,
                latency_runs: 4,
                runs: 1,
            },
        }
    }
}

pub(crate) fn run(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let scale = Scale::of(paths);
    let mut spent = Spent(Vec::new());
    latency(paths, &scale, None, results)?;
    let sqlite = sqlite_loops(paths, &scale, &mut spent)?;
    let floor = Row::new(
        "loop.processes",
        "a worker's process alone, 8 at a time: kanban --version",
        "tasks/s",
        processes_alone(paths, (scale.runs, scale.loop_tasks, MAX_SPAWN))?,
    );
    let row = Row::new(
        "loop.sqlite",
        "whole loop, SQLite, 1 gateway",
        "tasks/s",
        sqlite.rates,
    );
    let rate = row.median();
    let ratio = rate / floor.median();
    results.rows.push(
        row.ratio(ratio, "a worker's process alone")
            .goal(">= 500 tasks/s", rate >= 500.0),
    );
    results.rows.push(floor);
    loop_cpu_rows(sqlite.cpu_ms, rate, results);
    let server = Server::from_env();
    if let Err(why) = server.reachable() {
        results.note(format!(
            "scale: PostgreSQL rows skipped: {} is unreachable ({why}); {HINT}",
            server.shown()
        ));
        return Ok(());
    }
    pg_tick(paths, &scale, &server, results)?;
    latency(paths, &scale, Some(&server), results)?;
    pg_loops(paths, &scale, &server, &mut spent, results)
}

/// The PostgreSQL loop with 1, 2 and 4 gateways, interleaved run by run (a slow moment
/// of the machine hits every count alike) and compared with one gateway run by run.
fn pg_loops(
    paths: &Paths,
    scale: &Scale,
    server: &Server,
    spent: &mut Spent,
    results: &mut Results,
) -> Result<(), String> {
    let mut rates = vec![Vec::new(); GATEWAYS.len()];
    for run in 0..=scale.runs {
        for (at, gateways) in GATEWAYS.into_iter().enumerate() {
            let (rate, _) = one_loop(paths, scale, Some(server), (gateways, run), spent)?;
            if run > 0 || scale.runs == 0 {
                rates[at].push(rate);
            }
        }
    }
    let single = rates[0].clone();
    for (gateways, samples) in GATEWAYS.into_iter().zip(rates) {
        let ratios: Vec<f64> = samples.iter().zip(&single).map(|(n, one)| n / one).collect();
        let mut row = Row::new(
            &format!("loop.pg.{gateways}"),
            &format!("whole loop, PostgreSQL, {gateways} gateway(s)"),
            "tasks/s",
            samples,
        );
        if gateways > 1 {
            let ratio = median(&ratios);
            row = row.ratio(ratio, "1 gateway, per run");
            if gateways == 4 {
                row = row.goal(">= 1.0 x 1 gateway", ratio >= 1.0);
            }
        }
        results.rows.push(row);
    }
    Ok(())
}

/// A schema of its own on the server, dropped with everything in it when done.
struct Schema {
    server: String,
    name: String,
}

impl Schema {
    fn create(server: &Server, label: &str) -> Result<Schema, String> {
        let name = format!("kanban_bench_{label}_{}", std::process::id());
        let schema = Schema {
            server: server.url().to_owned(),
            name,
        };
        schema.psql(&format!(
            "DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0}",
            schema.name
        ))?;
        Ok(schema)
    }

    fn psql(&self, sql: &str) -> Result<(), String> {
        output(
            Command::new("psql")
                .arg(&self.server)
                .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
                .stdout(Stdio::null()),
        )
        .map(drop)
    }

    /// The server's URL with the schema as its `search_path`.
    fn url(&self) -> String {
        let joiner = if self.server.contains('?') { '&' } else { '?' };
        format!("{}{joiner}options=-csearch_path%3D{}", self.server, self.name)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = self.psql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
    }
}

/// `kanban --home HOME`, on the board of `url` when given.
fn kanban(paths: &Paths, home: &Path, url: Option<&str>) -> Command {
    let mut cmd = Command::new(paths.kanban());
    cmd.arg("--home").arg(home).env_remove("KANBAN_DATABASE_URL");
    if let Some(url) = url {
        cmd.env("KANBAN_DATABASE_URL", url);
    }
    cmd
}

fn start_gateway(paths: &Paths, home: &Path, url: Option<&str>) -> Result<Running, String> {
    let log = std::fs::File::create(home.join("gateway.log")).map_err(|e| format!("gateway.log: {e}"))?;
    let mut cmd = Command::new(paths.bins.join("kanban-gateway"));
    cmd.arg("--home")
        .arg(home)
        .env_remove("KANBAN_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(log);
    if let Some(url) = url {
        cmd.env("KANBAN_DATABASE_URL", url);
    }
    Running::spawn(&mut cmd)
}

/// The worker's first instruction in the latency's home: it writes the time.
const NOTE_START: &str = "date +%s%N > \\\"$KANBAN_WORKSPACE/spawned\\\"; ";

/// A home whose `quick` workers run `first` (nothing, or [`NOTE_START`]) and then
/// complete at once.
fn loop_home(
    paths: &Paths,
    name: &str,
    (interval, host): (u32, usize),
    first: &str,
) -> Result<PathBuf, String> {
    let kanban = path_str(&paths.kanban())?.to_owned();
    // The worker is `kanban complete` itself, behind a shell only when it notes a time first.
    let command = match first {
        "" => format!("[\"{kanban}\", \"complete\", \"--result\", \"ok\"]"),
        first => format!("[\"sh\", \"-c\", \"{first}exec {kanban} complete --result ok\"]"),
    };
    let config = format!(
        "gateway:\n  host_id: host-{host}\n\
         kanban:\n  dispatch_interval_seconds: {interval}\n  max_spawn: {MAX_SPAWN}\n  auto_decompose: false\n\
         profiles:\n  quick:\n    description: completes at once\n    command: {command}\n"
    );
    new_home(paths, name, &config)
}

/// Polls `done` every 10 ms while `gateways` live, for at most `limit`.
fn await_gateways(
    gateways: &mut [Running],
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let started = Instant::now();
    while !done()? {
        for gateway in gateways.iter_mut() {
            gateway
                .alive()
                .map_err(|e| format!("a gateway {e} while waiting for {what}"))?;
        }
        if started.elapsed() > limit {
            return Err(format!(
                "timed out after {} s waiting for {what}",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Ready to spawned, p50 and p99, with a 30 s tick: only wake-ups make it short.
fn latency(
    paths: &Paths,
    scale: &Scale,
    server: Option<&Server>,
    results: &mut Results,
) -> Result<(), String> {
    let backend = if server.is_some() { "postgres" } else { "sqlite" };
    let schema = server.map(|s| Schema::create(s, "latency")).transpose()?;
    let url = schema.as_ref().map(Schema::url);
    let home = loop_home(paths, &format!("latency-{backend}"), (30, 0), NOTE_START)?;
    let mut gateway = [start_gateway(paths, &home, url.as_deref())?];
    await_gateways(&mut gateway, Duration::from_secs(30), "the first tick", || {
        Ok(home.join("gateway.json").exists())
    })?;
    let (mut samples, mut creates) = (Vec::new(), Vec::new());
    for run in 0..=scale.latency_runs {
        let before = unix_nanos();
        let created = output(kanban(paths, &home, url.as_deref()).args([
            "create",
            &format!("latency {run}"),
            "--assignee",
            "quick",
            "--json",
        ]))?;
        let returned = unix_nanos();
        let id = json_line(&created)?["id"]
            .as_str()
            .ok_or("kanban create --json printed no id")?
            .to_owned();
        let noted = home.join("workspaces").join(&id).join("spawned");
        let mut spawned = 0u128;
        await_gateways(
            &mut gateway,
            Duration::from_secs(60),
            "the worker to start",
            || {
                spawned = std::fs::read_to_string(&noted)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(0);
                Ok(spawned > 0)
            },
        )?;
        if run > 0 {
            samples.push(spawned.saturating_sub(before) as f64 / 1e6);
            creates.push(returned.saturating_sub(before) as f64 / 1e6);
        }
        // The next task is made only once this one is done: a sample is the wake-up of an
        // idle gateway, not one shared with the previous worker's report.
        await_gateways(
            &mut gateway,
            Duration::from_secs(60),
            "the task to be done",
            || {
                let shown = output(kanban(paths, &home, url.as_deref()).args(["show", &id, "--json"]))?;
                Ok(json_line(&shown)?["task"]["status"] == "done")
            },
        )?;
    }
    let parts = Parts::measure(&home, scale.latency_runs)?;
    latency_rows(backend, (samples, creates), parts, results);
    Ok(())
}

/// The latency's rows: p50 against what no gateway can beat (the command that makes the
/// task ready, then the worker's own start to its first instruction), p99, the command
/// alone and, once, what a spawn costs here.
fn latency_rows(
    backend: &str,
    (samples, creates): (Vec<f64>, Vec<f64>),
    parts: Parts,
    results: &mut Results,
) {
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let p99 = sorted[((sorted.len() as f64 * 0.99).ceil() as usize).clamp(1, sorted.len()) - 1];
    let row = Row::new(
        &format!("latency.{backend}.p50"),
        &format!("ready -> spawned p50, {backend}, 30 s tick"),
        "ms",
        samples,
    );
    let (goal, limit) = match backend {
        "postgres" => (20.0, "< 20 ms"),
        _ => (10.0, "< 10 ms"),
    };
    let create = Row::new(
        &format!("latency.{backend}.create"),
        &format!("kanban create alone, {backend}"),
        "ms",
        creates,
    );
    let floor = create.median() + median(&parts.worker);
    let pass = row.median() < goal;
    let ratio = row.median() / floor;
    results.rows.push(
        row.ratio(ratio, "kanban create + the worker's start")
            .goal(limit, pass),
    );
    results.rows.push(Row::new(
        &format!("latency.{backend}.p99"),
        &format!("ready -> spawned p99, {backend}, 30 s tick"),
        "ms",
        vec![p99],
    ));
    results.rows.push(create);
    if backend == "sqlite" {
        results.rows.push(Row::new(
            "latency.spawn_true",
            "fork+exec+wait of /bin/true",
            "ms",
            parts.bare,
        ));
        results.rows.push(Row::new(
            "latency.worker_start",
            "the worker's start: sh -c 'date > file'",
            "ms",
            parts.worker,
        ));
    }
}

/// The board's completions as they happen, from one `kanban events --follow` reading
/// the board every 50 ms: a poll of the board that costs next to nothing, where a
/// `kanban` process per poll would take CPU from the loop it measures.
struct Completions {
    _follower: Running,
    lines: std::sync::mpsc::Receiver<()>,
}

impl Completions {
    fn follow(mut kanban: Command) -> Result<Completions, String> {
        let args = "events --all --kind completed --follow --json --interval 0.05";
        let mut follower = Running::spawn(kanban.args(args.split(' ')).stdout(Stdio::piped()))?;
        let stdout = follower
            .child_mut()
            .stdout
            .take()
            .ok_or("kanban events: no stdout")?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
        Ok(Completions {
            _follower: follower,
            lines,
        })
    }

    /// How many completions were printed since the last call; an error once the
    /// follower has stopped.
    fn arrived(&self) -> Result<usize, String> {
        let mut count = 0;
        loop {
            match self.lines.try_recv() {
                Ok(()) => count += 1,
                Err(std::sync::mpsc::TryRecvError::Empty) => return Ok(count),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    return Err("kanban events --follow stopped".into())
                }
            }
        }
    }
}

/// The figures of the whole loop, one per run.
struct Loops {
    /// Tasks/s, from start to every task done.
    rates: Vec<f64>,
    /// The machine's busy CPU time meanwhile (gateways, workers, the database server,
    /// the harness's follower), per task, in ms.
    cpu_ms: Vec<f64>,
}

/// The CPU a task of the loop costs the machine, and the rate that cost allows when
/// every core is busy: what the loop cannot beat with workers and a gateway of that
/// cost, whatever the gateway's order of work.
fn loop_cpu_rows(cpu_ms: Vec<f64>, rate: f64, results: &mut Results) {
    let cpu = Row::new(
        "loop.sqlite.cpu",
        "whole loop, SQLite: the machine's CPU time per task",
        "ms",
        cpu_ms,
    );
    let ceiling = cores() * 1e3 / cpu.median();
    results.rows.push(cpu);
    results.rows.push(
        Row::new(
            "loop.sqlite.ceiling",
            "every core busy at that CPU per task",
            "tasks/s",
            vec![ceiling],
        )
        .ratio(ceiling / rate, "the loop's rate"),
    );
}

/// The SQLite loop with one gateway, `runs` times after a warm-up.
fn sqlite_loops(paths: &Paths, scale: &Scale, spent: &mut Spent) -> Result<Loops, String> {
    let (mut rates, mut cpu_ms) = (Vec::new(), Vec::new());
    for run in 0..=scale.runs {
        let (rate, busy_ms) = one_loop(paths, scale, None, (1, run), spent)?;
        if run > 0 || scale.runs == 0 {
            rates.push(rate);
            cpu_ms.push(busy_ms);
        }
    }
    Ok(Loops { rates, cpu_ms })
}

/// One run of the whole loop with `gateways` gateways, each on a home of its own (new,
/// kept in `spent`): tasks/s, and the machine's busy CPU time per task in ms.
fn one_loop(
    paths: &Paths,
    scale: &Scale,
    server: Option<&Server>,
    (gateways, run): (usize, usize),
    spent: &mut Spent,
) -> Result<(f64, f64), String> {
    let backend = if server.is_some() { "postgres" } else { "sqlite" };
    let schema = server.map(|s| Schema::create(s, "loop")).transpose()?;
    let url = schema.as_ref().map(Schema::url);
    let name = |g| format!("loop-{backend}-{gateways}-{g}-run{run}");
    let homes = (0..gateways)
        .map(|g| loop_home(paths, &name(g), (1, g), ""))
        .collect::<Result<Vec<_>, _>>()?;
    spent.0.extend(homes.iter().cloned());
    populate(paths, &homes[0].join("kanban.db"), scale.loop_tasks, "quick")?;
    if let Some(url) = &url {
        output(kanban(paths, &homes[0], None).args(["migrate", "--to", url]))?;
    }
    let completions = Completions::follow(kanban(paths, &homes[0], url.as_deref()))?;
    let started = Instant::now();
    let busy = busy_seconds()?;
    let mut running = homes
        .iter()
        .map(|home| start_gateway(paths, home, url.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut done = 0;
    await_gateways(&mut running, LOOP_LIMIT, "every task done", || {
        done += completions.arrived()?;
        Ok(done == scale.loop_tasks)
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let busy = busy_seconds()? - busy;
    drop(running);
    let events = json_line(&output(
        kanban(paths, &homes[0], url.as_deref()).args(["events", "--all", "--kind", "claimed", "--json"]),
    )?)?;
    let claims = events
        .as_array()
        .ok_or("kanban events --json printed no array")?
        .iter()
        .filter(|e| e["kind"] == "claimed")
        .count();
    if claims != scale.loop_tasks {
        return Err(format!(
            "{} tasks were claimed {claims} times with {gateways} gateway(s)",
            scale.loop_tasks
        ));
    }
    let tasks = scale.loop_tasks as f64;
    Ok((tasks / seconds, busy * 1e3 / tasks))
}

/// The dispatcher tick on the tick workload's largest board, moved to PostgreSQL.
fn pg_tick(paths: &Paths, scale: &Scale, server: &Server, results: &mut Results) -> Result<(), String> {
    let home = if scale.tick_size == TICK_SIZE {
        boards(paths)?;
        home_with_board(paths, TICK_SIZE, "pg-tick")?
    } else {
        let home = paths.work.join("pg-tick");
        mkdir(&home)?;
        let size = scale.tick_size.to_string();
        let db = home.join("kanban.db");
        example(
            paths,
            "bench_tick",
            &[
                "build",
                "--db",
                path_str(&db)?,
                "--tasks",
                &size,
                "--ready",
                "100",
                "--triage",
                "10",
            ],
        )?;
        home
    };
    let schema = Schema::create(server, "tick")?;
    let url = schema.url();
    output(kanban(paths, &home, None).args(["migrate", "--to", &url]))?;
    let mut samples = Vec::new();
    for run in 0..=scale.runs {
        let figures = json_line(&output(
            Command::new(paths.examples.join("bench_tick"))
                .args(["tick", "--home", path_str(&home)?, "--ticks", TICKS])
                .env("KANBAN_DATABASE_URL", &url),
        )?)?;
        if run > 0 || scale.runs == 0 {
            let ms = figures["ticks_ms"]
                .as_array()
                .ok_or("bench_tick printed no ticks_ms")?;
            samples.extend(ms.iter().filter_map(Value::as_f64));
        }
    }
    let label = format!("tick, {} tasks, PostgreSQL", scale.tick_size);
    let row = Row::new("pg.tick", &label, "ms", samples);
    let pass = row.median() < 5.0;
    results.rows.push(row.goal("< 5 ms", pass));
    Ok(())
}
