//! Workloads for `cargo xtask bench` on the PostgreSQL store, against the server of
//! `KANBAN_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`). Each
//! subcommand does one measurement in a fresh schema (or, for pgbench, a fresh database)
//! that it drops afterwards, and prints one JSON line of figures on stdout; xtask
//! repeats, aggregates and compares. Errors go to stderr with a non-zero exit; the
//! password of the URL is never printed.
//!
//! - `pgbench --seconds T`: pgbench's built-in simple-update script (`-N`), one client,
//!   on a scratch database initialised with `pgbench -i`: the rate of small write
//!   transactions this server sustains, the baseline of the store cycle.
//! - `cycle --max N --seconds T`: claim then complete of ready tasks through the `Store`
//!   trait, one process.
//! - `claim --procs P --max N --seconds T`: P copies of this binary take tasks from one
//!   shared ready queue as a gateway's tick does (a page of [`CLAIM_PAGE`] tasks in
//!   claim order from `claimable`, then `claim_ready` on their ids, `SKIP LOCKED`) and
//!   complete them; the board is then checked for double claims (a task with two runs, a
//!   completion lost, or a count of completions that disagrees with the tasks done).

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::Instant;

use board_core::{BoardStats, BoardWrites, DispatchQueue, NewTask, Status, TaskId};
use board_postgres::{redact_url, Options, PgStore};
use postgres::config::Host;
use postgres::NoTls;
use serde_json::{json, Value};
use store_bench::{budget, now, number, run_cycles, text, Contender, Cycles, Flags, Workload};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Concurrent writers that fill a board before a measurement.
const FILLERS: usize = 4;
/// Ready tasks a claimer lists and claims at once: a gateway's `max_spawn` room.
const CLAIM_PAGE: usize = 8;

fn main() {
    let workloads: &[(&str, Workload)] = &[
        ("pgbench", pgbench),
        ("cycle", cycle),
        ("claim", claim),
        ("claim-worker", claim_worker),
    ];
    store_bench::main("bench_store_postgres", workloads)
}

fn url() -> String {
    std::env::var("KANBAN_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

fn config(url: &str) -> Result<postgres::Config, String> {
    url.parse()
        .map_err(|_| format!("{}: not a usable database URL", redact_url(url)))
}

/// A direct connection, for creating and dropping scratch schemas and databases.
fn admin(url: &str) -> Result<postgres::Client, String> {
    config(url)?
        .connect(NoTls)
        .map_err(|e| format!("{}: cannot connect: {}", redact_url(url), cause(&e)))
}

/// A driver error in one line: the server's message, else the error and its cause.
fn cause(e: &postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(db), _) => db.message().to_owned(),
        (None, Some(source)) => format!("{e}: {source}"),
        (None, None) => e.to_string(),
    }
}

/// A name no other run uses: `kanban_bench_<pid>_<random>`.
fn unique_name(prefix: &str) -> Result<String, String> {
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|e| format!("no randomness: {e}"))?;
    Ok(format!(
        "{prefix}_{}_{:08x}",
        std::process::id(),
        u32::from_le_bytes(random)
    ))
}

/// A schema or database created for one measurement and dropped when this is dropped,
/// whether the measurement succeeded or not.
struct Scratch {
    url: String,
    /// `DROP ... IF EXISTS` of the scratch object.
    drop: String,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let dropped =
            admin(&self.url).and_then(|mut client| client.batch_execute(&self.drop).map_err(|e| cause(&e)));
        if let Err(e) = dropped {
            eprintln!("bench_store_postgres: could not clean up ({}): {e}", self.drop);
        }
    }
}

/// A fresh board in its own schema; the schema is dropped with the returned guard.
fn fresh_board(url: &str) -> Result<(PgStore, String, Scratch), String> {
    let schema = unique_name("kanban_bench")?;
    let scratch = Scratch {
        url: url.to_owned(),
        drop: format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
    };
    let store = open(url, &schema)?;
    Ok((store, schema, scratch))
}

fn open(url: &str, schema: &str) -> Result<PgStore, String> {
    let options = Options {
        schema: Some(schema.to_owned()),
        ..Options::default()
    };
    PgStore::open(url, &options).map_err(|e| e.to_string())
}

/// Creates `n` ready tasks, from a few writers at once: filling is not what is measured.
fn create_ready(store: &PgStore, n: usize) -> Result<Vec<TaskId>, String> {
    let now = now();
    let per = n.div_ceil(FILLERS);
    std::thread::scope(|scope| {
        let fillers: Vec<_> = (0..FILLERS)
            .map(|filler| {
                scope.spawn(move || {
                    (filler * per..((filler + 1) * per).min(n))
                        .map(|i| {
                            let task = NewTask::titled(format!("bench task {i}"));
                            store.create(&task, now).map(|t| t.id).map_err(|e| e.to_string())
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        let mut ids = Vec::with_capacity(n);
        for filler in fillers {
            ids.extend(
                filler
                    .join()
                    .map_err(|_| "a filler thread panicked".to_owned())??,
            );
        }
        Ok(ids)
    })
}

fn pgbench(f: &Flags) -> Result<Value, String> {
    let seconds: u32 = number(f, "seconds")?;
    let url = url();
    let config = config(&url)?;
    let database = unique_name("kanban_pgbench")?;
    admin(&url)?
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .map_err(|e| {
            format!(
                "{}: cannot create a scratch database: {}",
                redact_url(&url),
                cause(&e)
            )
        })?;
    let _scratch = Scratch {
        url: url.clone(),
        drop: format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
    };
    // libpq's environment rather than a URL on the command line, so the password shows
    // in no process listing.
    let mut env: Vec<(&str, OsString)> = vec![("PGDATABASE", database.clone().into())];
    match config.get_hosts().first() {
        Some(Host::Tcp(host)) => env.push(("PGHOST", host.into())),
        Some(Host::Unix(dir)) => env.push(("PGHOST", dir.into())),
        None => {}
    }
    if let Some(port) = config.get_ports().first() {
        env.push(("PGPORT", port.to_string().into()));
    }
    if let Some(user) = config.get_user() {
        env.push(("PGUSER", user.into()));
    }
    if let Some(password) = config.get_password() {
        env.push((
            "PGPASSWORD",
            String::from_utf8_lossy(password).into_owned().into(),
        ));
    }
    let run = |args: &[&str]| -> Result<String, String> {
        let out = Command::new("pgbench")
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "cannot run pgbench ({e}); it comes with the PostgreSQL server package \
                     (Debian: postgresql-15)"
                )
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!(
                "pgbench {} failed ({}): {last}",
                args.join(" "),
                out.status
            ))
        }
    };
    run(&["-i", "-q"])?;
    let report = run(&["-N", "-c", "1", "-T", &seconds.to_string()])?;
    let figure = |prefix: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
    };
    let tps = figure("tps = ").ok_or_else(|| format!("no tps in pgbench's report: {report:?}"))?;
    let transactions = figure("number of transactions actually processed: ").unwrap_or(0.0);
    Ok(json!({"tps": tps, "transactions": transactions, "seconds": seconds}))
}

fn cycle(f: &Flags) -> Result<Value, String> {
    let url = url();
    let (store, _, _scratch) = fresh_board(&url)?;
    let ids = create_ready(&store, number(f, "max")?)?;
    let budget = budget(f)?;
    let started = Instant::now();
    let c = run_cycles(&store, &ids, budget, started);
    Ok(c.figures(started.elapsed().as_secs_f64()))
}

fn claim(f: &Flags) -> Result<Value, String> {
    let url = url();
    let procs: usize = number(f, "procs")?;
    let seconds = text(f, "seconds")?;
    let (store, schema, _scratch) = fresh_board(&url)?;
    create_ready(&store, number(f, "max")?)?;
    let copy: Vec<OsString> = ["claim-worker", "--schema", &schema, "--seconds", seconds]
        .map(OsString::from)
        .to_vec();
    let contended = store_bench::contend(vec![copy; procs])?;
    let mut figures = contended.figures();
    let double = double_claims(&store, contended.sum("cycles"), contended.sum("lost"))?;
    figures["double_claims"] = json!(double);
    Ok(figures)
}

/// Tasks claimed more than once: a second run of one task, a claim or completion that
/// another writer won (the copies' `lost`), or a count of completions that differs from
/// the tasks the board shows done.
fn double_claims(store: &PgStore, completed: u64, lost: u64) -> Result<u64, String> {
    let board = store.snapshot().map_err(|e| e.to_string())?;
    let mut runs: HashMap<&TaskId, u64> = HashMap::new();
    for run in &board.runs {
        *runs.entry(&run.task_id).or_default() += 1;
    }
    let second_runs: u64 = runs.values().map(|n| n - 1).sum();
    let done = board.tasks.iter().filter(|t| t.status == Status::Done).count() as u64;
    Ok(second_runs + lost + completed.abs_diff(done))
}

fn claim_worker(f: &Flags) -> Result<Value, String> {
    let store = open(&url(), text(f, "schema")?)?;
    let budget = budget(f)?;
    let contender = Contender::start(f)?;
    let started = Instant::now();
    let mut c = Cycles::default();
    while started.elapsed() < budget {
        let now = now();
        let page = match store.claimable(CLAIM_PAGE) {
            Ok(page) if page.is_empty() => break,
            Ok(page) => page,
            Err(e) => {
                c.failed("claimable", e);
                continue;
            }
        };
        let ids: Vec<board_core::Offer> = page.into_iter().map(|t| board_core::Offer::work(t.id)).collect();
        // Tasks another copy holds or took meanwhile are skipped: the next page has others.
        match store.claim_ready(&ids, 900, None, now) {
            Ok(claims) => {
                for claim in claims {
                    c.complete(&store, &claim.task.id, claim.run_id, now);
                }
            }
            Err(e) => c.failed("claim_ready", e),
        }
    }
    Ok(contender.report(&c))
}
