//! What the machine allows, measured beside the figures it bounds: a bare spawn, the
//! worker's own start, the worker's process alone, and the CPU time the whole machine
//! spends while a workload runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::Paths;

pub(super) fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The machine's busy CPU time so far (every process and the kernel's work for them:
/// `user`, `nice`, `system`, `irq` and `softirq` of `/proc/stat`), in seconds: read
/// before and after a workload, the difference is what it cost the machine, whichever
/// processes spent it.
pub(super) fn busy_seconds() -> Result<f64, String> {
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or("/proc/stat: no cpu line")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().map_err(|_| format!("/proc/stat: bad field {f:?}")))
        .collect::<Result<_, _>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, ..] = fields[..] else {
        return Err("/proc/stat: a short cpu line".into());
    };
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return Err("sysconf(_SC_CLK_TCK) failed".into());
    }
    Ok((user + nice + system + irq + softirq) as f64 / ticks as f64)
}

/// The cores this machine gives the workloads.
pub(super) fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// What a spawn costs on this machine, measured beside the latency: a bare
/// `fork`+`exec`+`wait` of `/bin/true`, and the bench's worker command from its spawn to
/// its first instruction (the shell starting, then `date` writing the time).
pub(super) struct Parts {
    pub bare: Vec<f64>,
    pub worker: Vec<f64>,
}

impl Parts {
    pub fn measure(home: &Path, runs: usize) -> Result<Parts, String> {
        let noted = home.join("spawn-limit");
        let (mut bare, mut worker) = (Vec::new(), Vec::new());
        for run in 0..=runs {
            let started = Instant::now();
            let status = Command::new("/bin/true")
                .status()
                .map_err(|e| format!("/bin/true: {e}"))?;
            let took = started.elapsed().as_secs_f64() * 1e3;
            if !status.success() {
                return Err("/bin/true failed".to_owned());
            }
            let before = unix_nanos();
            let status = Command::new("sh")
                .args(["-c", "date +%s%N > \"$0\""])
                .arg(&noted)
                .status()
                .map_err(|e| format!("sh: {e}"))?;
            let at: u128 = std::fs::read_to_string(&noted)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .filter(|_| status.success())
                .ok_or("the shell noted no time")?;
            if run > 0 {
                bare.push(took);
                worker.push(at.saturating_sub(before) as f64 / 1e6);
            }
        }
        Ok(Parts { bare, worker })
    }
}

/// What no loop can beat here: the process a no-op worker is (`kanban`), started and
/// waited for `at_once` at a time like the gateway's workers, with no board and no
/// report; per second, one figure per run after the first (of a single run, its own).
pub(super) fn processes_alone(
    paths: &Paths,
    (runs, tasks, at_once): (usize, usize, usize),
) -> Result<Vec<f64>, String> {
    let mut samples = Vec::new();
    for run in 0..=runs {
        let started = Instant::now();
        let mut running = std::collections::VecDeque::new();
        for _ in 0..tasks {
            if running.len() == at_once {
                wait_ok(running.pop_front())?;
            }
            let child = Command::new(paths.kanban())
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("kanban --version: {e}"))?;
            running.push_back(child);
        }
        while !running.is_empty() {
            wait_ok(running.pop_front())?;
        }
        if run > 0 || runs == 0 {
            samples.push(tasks as f64 / started.elapsed().as_secs_f64());
        }
    }
    Ok(samples)
}

fn wait_ok(child: Option<std::process::Child>) -> Result<(), String> {
    match child.map(|mut c| c.wait()) {
        Some(Ok(status)) if !status.success() => Err(format!("kanban --version: {status}")),
        Some(Err(e)) => Err(format!("kanban --version: {e}")),
        _ => Ok(()),
    }
}
