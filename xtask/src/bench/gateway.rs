//! The workloads of a running gateway: its footprint with busy workers and the
//! decomposition turnaround.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    example, json_line, mkdir, output, path_str, Paths, Results, Row, BUSY_WORKERS, GATEWAY_RUNS, RUNS,
    SPLIT_SCRIPT,
};

/// A child process stopped with SIGTERM (then SIGKILL) when dropped.
pub(super) struct Running {
    child: Child,
}

impl Running {
    pub(crate) fn spawn(cmd: &mut Command) -> Result<Running, String> {
        let shown = format!("{cmd:?}");
        cmd.stdin(Stdio::null())
            .spawn()
            .map(|child| Running { child })
            .map_err(|e| format!("cannot start {shown}: {e}"))
    }

    /// Starts `cmd` with the stdin it was given (`spawn` closes it).
    pub(crate) fn spawn_keeping_stdin(cmd: &mut Command) -> Result<Running, String> {
        let shown = format!("{cmd:?}");
        cmd.spawn()
            .map(|child| Running { child })
            .map_err(|e| format!("cannot start {shown}: {e}"))
    }

    pub(crate) fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running; an exit is an error with its status.
    pub(super) fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("exited early ({status})")),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: a signal to a child this harness started and has not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Workers a gateway started: their process groups are killed when this is dropped,
/// since they outlive the gateway by design.
struct Workers {
    db: PathBuf,
    inspect: PathBuf,
}

impl Workers {
    fn pids(&self) -> Vec<i64> {
        let mut cmd = Command::new(&self.inspect);
        cmd.arg("inspect").arg("--db").arg(&self.db);
        output(&mut cmd)
            .and_then(|o| json_line(&o))
            .map(|v| {
                v["worker_pids"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_i64)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for pid in self.pids() {
            if pid > 1 {
                // SAFETY: each worker leads its own process group (docs/gateway.md); the pid
                // is one our gateway recorded for a run of this scratch board.
                unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
            }
        }
    }
}

/// Resident memory of a process, in MiB.
fn rss_mib(pid: u32) -> Result<f64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("{path} has no VmRSS"))?;
    Ok(kib / 1024.0)
}

/// The gateway's tick count from `gateway.json` (0 before its first tick).
fn ticks(home: &Path) -> u64 {
    std::fs::read_to_string(home.join("gateway.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["ticks"].as_u64())
        .unwrap_or(0)
}

/// Polls `done` every 20 ms until it holds, the gateway dies, or `limit` passes.
pub(super) fn wait_for(
    gateway: &mut Running,
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        gateway
            .alive()
            .map_err(|e| format!("the gateway {e} while waiting for {what}"))?;
        if done()? {
            return Ok(());
        }
        if started.elapsed() > limit {
            return Err(format!(
                "timed out after {} s waiting for {what}",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Adds `tasks` ready tasks for `assignee` to the board file `db`.
pub(super) fn populate(paths: &Paths, db: &Path, tasks: usize, assignee: &str) -> Result<(), String> {
    let tasks = tasks.to_string();
    let args = [
        "populate",
        "--db",
        path_str(db)?,
        "--ready",
        &tasks,
        "--assignee",
        assignee,
    ];
    example(paths, "bench_store", &args).map(drop)
}

/// The homes of the loop's runs, removed together once the workload is over. A run
/// removing the last run's home (a workspace directory and a log file per task) just
/// before it starts would time its own cleanup: on a file system without a journal,
/// ext4 passes over inodes freed in the last half minute when it allocates one, reading
/// the inode table to find them, and the next run's gateway allocates two per task.
pub(super) struct Spent(pub(super) Vec<PathBuf>);

impl Drop for Spent {
    fn drop(&mut self) {
        for home in &self.0 {
            let _ = std::fs::remove_dir_all(home);
        }
    }
}

/// A new home with `config.yaml` replaced by `config`.
pub(super) fn new_home(paths: &Paths, name: &str, config: &str) -> Result<PathBuf, String> {
    let home = paths.work.join(name);
    if home.exists() {
        std::fs::remove_dir_all(&home).map_err(|e| format!("cannot empty {}: {e}", home.display()))?;
    }
    output(Command::new(paths.kanban()).arg("--home").arg(&home).arg("init"))?;
    std::fs::write(home.join("config.yaml"), config).map_err(|e| format!("cannot write config.yaml: {e}"))?;
    Ok(home)
}

pub(super) fn start_gateway(paths: &Paths, home: &Path) -> Result<Running, String> {
    let log = std::fs::File::create(home.join("gateway.log")).map_err(|e| format!("gateway.log: {e}"))?;
    Running::spawn(
        Command::new(paths.bins.join("kanban-gateway"))
            .arg("--home")
            .arg(home)
            .stdout(Stdio::null())
            .stderr(log),
    )
}

/// Workload 5: the gateway's resident memory idle, and with 100 running workers.
pub(super) fn gateway_footprint(paths: &Paths, results: &mut Results) -> Result<(), String> {
    let mut idle = Vec::new();
    let mut busy = Vec::new();
    let inspect = paths.examples.join("bench_store");
    for run in 0..GATEWAY_RUNS {
        let config = "kanban:\n  dispatch_interval_seconds: 0.2\n  max_spawn: 0\n";
        let home = new_home(paths, &format!("gateway-idle-{run}"), config)?;
        let mut gateway = start_gateway(paths, &home)?;
        wait_for(&mut gateway, Duration::from_secs(30), "5 ticks", || {
            Ok(ticks(&home) >= 5)
        })?;
        idle.push(rss_mib(gateway.pid())?);
        drop(gateway);

        let config = format!(
            "kanban:\n  dispatch_interval_seconds: 0.2\n  max_spawn: {BUSY_WORKERS}\n\
             profiles:\n  default:\n    command: [\"sleep\", \"600\"]\n"
        );
        let home = new_home(paths, &format!("gateway-busy-{run}"), &config)?;
        let db = home.join("kanban.db");
        populate(paths, &db, BUSY_WORKERS, "default")?;
        let mut gateway = start_gateway(paths, &home)?;
        // Declared after the gateway so it drops first: the workers die before it stops.
        let running = Workers {
            db: db.clone(),
            inspect: inspect.clone(),
        };
        wait_for(
            &mut gateway,
            Duration::from_secs(60),
            "100 running workers",
            || {
                let v = example(paths, "bench_store", &["inspect", "--db", path_str(&db)?])?;
                Ok(v["worker_pids"].as_array().map_or(0, Vec::len) >= BUSY_WORKERS)
            },
        )?;
        let after = ticks(&home) + 2;
        wait_for(&mut gateway, Duration::from_secs(30), "2 more ticks", || {
            Ok(ticks(&home) >= after)
        })?;
        busy.push(rss_mib(gateway.pid())?);
        drop(running);
        drop(gateway);
    }
    let row = Row::new("gateway.rss.idle", "gateway RSS, idle", "MiB", idle);
    let pass = row.median() < 20.0;
    let idle_median = row.median();
    results.rows.push(row.goal("< 20 MiB", pass));
    let row = Row::new("gateway.rss.busy", "gateway RSS, 100 workers", "MiB", busy);
    let ratio = row.median() / idle_median;
    let pass = row.median() < 20.0;
    results
        .rows
        .push(row.ratio(ratio, "gateway RSS, idle").goal("< 20 MiB", pass));
    Ok(())
}

/// Workload 6: from a triage card's creation to its children in the db, with an
/// instant fake model and a 1 s tick. Timed from the moment `kanban create` returns.
pub(super) fn decomposition(paths: &Paths, results: &mut Results) -> Result<(), String> {
    mkdir(&paths.work)?;
    let script = paths.work.join("split-script.json");
    std::fs::write(&script, SPLIT_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    let mut fake = Running::spawn(
        Command::new(paths.bins.join("fake-llm"))
            .args(["serve", "--port", "0", "--script"])
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )?;
    let stdout = fake.child.stdout.take().ok_or("fake-llm has no stdout")?;
    let mut base_url = String::new();
    BufReader::new(stdout)
        .read_line(&mut base_url)
        .map_err(|e| format!("reading fake-llm's base URL: {e}"))?;
    let base_url = base_url.trim();
    if !base_url.starts_with("http") {
        return Err(format!("fake-llm printed {base_url:?} instead of its base URL"));
    }
    let config = format!(
        "model:\n  base_url: {base_url}\n  default: bench-model\n  api_key_env: KANBAN_BENCH_NO_KEY\n\
         kanban:\n  dispatch_interval_seconds: 1\n  max_spawn: 0\n"
    );
    let home = new_home(paths, "decompose", &config)?;
    let db = home.join("kanban.db");
    let mut gateway = start_gateway(paths, &home)?;
    wait_for(&mut gateway, Duration::from_secs(30), "the first tick", || {
        Ok(ticks(&home) >= 1)
    })?;
    let mut samples = Vec::new();
    for run in 0..=RUNS {
        let created = output(Command::new(paths.kanban()).arg("--home").arg(&home).args([
            "create",
            &format!("rough idea {run}"),
            "--triage",
            "--json",
        ]))?;
        let started = Instant::now();
        let card = json_line(&created)?;
        let id = card["id"]
            .as_str()
            .ok_or("kanban create --json printed no id")?
            .to_owned();
        wait_for(
            &mut gateway,
            Duration::from_secs(30),
            "the card's children",
            || {
                let v = example(
                    paths,
                    "bench_store",
                    &["inspect", "--db", path_str(&db)?, "--subtasks", &id],
                )?;
                Ok(v["subtasks"].as_u64().unwrap_or(0) > 0)
            },
        )?;
        if run > 0 {
            samples.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    drop(gateway);
    results.rows.push(Row::new(
        "decompose.turnaround",
        "triage -> children (1 s tick)",
        "ms",
        samples,
    ));
    Ok(())
}
