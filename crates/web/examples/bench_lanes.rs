//! The lanes' benchmark (`cargo xtask bench --only lanes`): agents claiming work over
//! HTTP from the release `kanban serve` on a home xtask prepared (docs/lanes.md). Prints
//! one JSON line of samples:
//!
//! - claim -> complete throughput with 1, 4 and 16 HTTP lanes doing no work, each on its
//!   own keep-alive connection, against the same claim and complete made in this process
//!   on the store itself (no HTTP, no server): what the board allows;
//! - ready -> claimed by a lane waiting in a long poll: from the start of a `kanban
//!   create` of a task for it to the claim's answer, against the `kanban create` alone;
//! - the server's memory idle and with 1,000 lanes waiting at once.
//!
//! `bench_lanes --kanban PATH --home DIR --runs N`

#[path = "served/mod.rs"]
mod served;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::lanes::{Lane, LaneClaim};
use board_core::{BoardWrites, Checks, Completion, LaneDesk, NewTask};
use board_sqlite::{Options, SqliteStore};
use serde_json::{json, Value};
use served::{args, Args, Server};

/// The profile every lane here serves.
const PROFILE: &str = "ext";
/// Tasks each throughput sample drains.
const TASKS: usize = 200;
/// Lane counts of the throughput rows.
const LANES: [usize; 3] = [1, 4, 16];
/// Lanes waiting at once for the memory figure.
const WAITING: usize = 1000;
/// Rounds of the ready -> claimed figure per run.
const ROUNDS: usize = 20;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A lane's token: fixed, since the bench's board is thrown away.
fn token(name: &str) -> String {
    let digest = board_core::lanes::token_hash(name);
    format!("kl_{}", &digest[..64])
}

fn open(home: &Path) -> Result<SqliteStore, String> {
    SqliteStore::open(home.join("kanban.db"), &Options::default()).map_err(|e| e.to_string())
}

fn lane(store: &SqliteStore, name: &str) -> Result<String, String> {
    let token = token(name);
    let lane = Lane::new(name, &[PROFILE.to_owned()], &token, now()).map_err(|e| e.to_string())?;
    store.create_lane(&lane).map_err(|e| e.to_string())?;
    Ok(token)
}

fn tasks(store: &SqliteStore, n: usize) -> Result<(), String> {
    for i in 0..n {
        let task = NewTask {
            assignee: Some(PROFILE.into()),
            ..NewTask::titled(format!("bench task {i}"))
        };
        store.create(&task, now()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())
}

/// One lane's claim over HTTP: `Some((task_id, run_id))`, or `None` on 204.
async fn claim(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    wait: u32,
) -> Result<Option<(String, i64)>, String> {
    let r = http
        .post(format!("{base}/api/lanes/claim?wait={wait}"))
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match r.status().as_u16() {
        204 => Ok(None),
        200 => {
            let claim: Value = r.json().await.map_err(|e| e.to_string())?;
            let id = claim["task_id"].as_str().ok_or("a claim without task_id")?;
            Ok(Some((
                id.to_owned(),
                claim["run_id"].as_i64().ok_or("no run_id")?,
            )))
        }
        status => Err(format!("claim: {status}: {}", r.text().await.unwrap_or_default())),
    }
}

async fn complete(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    (id, run): &(String, i64),
) -> Result<(), String> {
    let r = http
        .post(format!("{base}/api/lanes/tasks/{id}/complete"))
        .bearer_auth(token)
        .json(&json!({ "run_id": run }))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match r.status().as_u16() {
        200 => Ok(()),
        status => Err(format!(
            "complete: {status}: {}",
            r.text().await.unwrap_or_default()
        )),
    }
}

/// One lane claiming and completing until nothing is ready; how many it did.
async fn drain(base: String, token: String) -> Result<usize, String> {
    let http = client()?;
    let mut done = 0;
    while let Some(held) = claim(&http, &base, &token, 0).await? {
        complete(&http, &base, &token, &held).await?;
        done += 1;
    }
    Ok(done)
}

/// Tasks per second with `n` lanes draining [`TASKS`] tasks at once.
async fn throughput(store: &SqliteStore, base: &str, tokens: &[String], n: usize) -> Result<f64, String> {
    tasks(store, TASKS)?;
    let started = Instant::now();
    let lanes: Vec<_> = tokens[..n]
        .iter()
        .map(|t| tokio::spawn(drain(base.to_owned(), t.clone())))
        .collect();
    let mut done = 0;
    for lane in lanes {
        done += lane.await.map_err(|e| e.to_string())??;
    }
    if done != TASKS {
        return Err(format!("{n} lanes did {done} of {TASKS} tasks"));
    }
    Ok(TASKS as f64 / started.elapsed().as_secs_f64())
}

/// The same claim and complete on the store in this process: tasks per second.
fn store_cycle(store: &SqliteStore, lane: &str) -> Result<f64, String> {
    tasks(store, TASKS)?;
    let started = Instant::now();
    let no_checks = |_: &board_core::Task| Checks::default();
    for _ in 0..TASKS {
        let LaneClaim::Claimed(c) = store
            .claim_for_lane(lane, 600, 4, &no_checks, now())
            .map_err(|e| e.to_string())?
        else {
            return Err("the store found nothing ready".to_owned());
        };
        let done = Completion {
            expected_run_id: Some(c.run_id),
            ..Completion::default()
        };
        store
            .complete(&c.task.id, &done, now())
            .map_err(|e| e.to_string())?;
    }
    Ok(TASKS as f64 / started.elapsed().as_secs_f64())
}

/// Waits until the store shows `name` waiting (its claim is in the long poll).
async fn waiting(store: &SqliteStore, name: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lane = store.lane(name).map_err(|e| e.to_string())?;
        if lane.and_then(|l| l.waiting_until).is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("lane {name} never waited"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One round: a lane waits; `kanban create` makes a task for it. The milliseconds from
/// the create's start to the claim's answer, and of the create alone.
async fn ready_to_claimed(
    a: &Args,
    store: &SqliteStore,
    base: &str,
    token: &str,
) -> Result<(f64, f64), String> {
    let http = client()?;
    let (b, t) = (base.to_owned(), token.to_owned());
    let waiter = tokio::spawn(async move {
        let claimed = claim(&http, &b, &t, 60).await;
        (claimed, Instant::now(), http)
    });
    waiting(store, "waiter").await?;
    let started = Instant::now();
    let out = std::process::Command::new(&a.kanban)
        .arg("--home")
        .arg(&a.home)
        .args(["create", "ready now", "--assignee", PROFILE])
        .output()
        .map_err(|e| format!("kanban create: {e}"))?;
    let created = started.elapsed();
    if !out.status.success() {
        return Err(format!("kanban create: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let (claimed, answered, http) = waiter.await.map_err(|e| e.to_string())?;
    let held = claimed?.ok_or("the waiting claim ended empty")?;
    complete(&http, base, token, &held).await?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok((ms(answered.saturating_duration_since(started)), ms(created)))
}

/// The server's memory idle, then with [`WAITING`] lanes' claims waiting at once.
async fn memory(a: &Args, store: &SqliteStore) -> Result<(f64, f64), String> {
    let server = Server::start(&a.kanban, &a.home)?;
    let idle = server.rss_mib()?;
    let mut tokens = Vec::new();
    for i in 0..WAITING {
        tokens.push(lane(store, &format!("idle-{i:04}"))?);
    }
    let http = client()?;
    let claims: Vec<_> = tokens
        .into_iter()
        .map(|t| {
            let (http, base) = (http.clone(), server.base.clone());
            tokio::spawn(async move { claim(&http, &base, &t, 120).await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = store.lane_stats().map_err(|e| e.to_string())?;
        let at = now();
        let n = stats.iter().filter(|l| l.state(at) == "waiting").count();
        if n >= WAITING {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("only {n} of {WAITING} lanes waited"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rss = server.rss_mib()?;
    for c in claims {
        c.abort();
    }
    Ok((idle, rss))
}

async fn measure(a: &Args) -> Result<Value, String> {
    let store = open(&a.home)?;
    let tokens: Vec<String> = (0..16)
        .map(|i| lane(&store, &format!("lane-{i:02}")))
        .collect::<Result<_, _>>()?;
    let waiter = lane(&store, "waiter")?;
    lane(&store, "in-process")?;
    let server = Server::start(&a.kanban, &a.home)?;
    let mut by_lanes = serde_json::Map::new();
    for n in LANES {
        let mut samples = Vec::new();
        for _ in 0..a.runs {
            samples.push(throughput(&store, &server.base, &tokens, n).await?);
        }
        by_lanes.insert(n.to_string(), json!(samples));
    }
    let mut cycle = Vec::new();
    for _ in 0..a.runs {
        cycle.push(store_cycle(&store, "in-process")?);
    }
    let (mut latency, mut create) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS * a.runs {
        let (ms, created) = ready_to_claimed(a, &store, &server.base, &waiter).await?;
        latency.push(ms);
        create.push(created);
    }
    drop(server);
    let (idle, waiting) = memory(a, &store).await?;
    Ok(json!({
        "throughput_per_s": by_lanes,
        "store_cycle_per_s": cycle,
        "ready_to_claimed_ms": latency,
        "create_ms": create,
        "rss_idle_mib": idle,
        "rss_waiting_mib": waiting,
        "waiting": WAITING,
        "tasks_per_sample": TASKS,
    }))
}

#[tokio::main]
async fn main() {
    let result = match args() {
        Ok(a) => measure(&a).await,
        Err(e) => Err(e),
    };
    served::report("bench_lanes", result);
}
