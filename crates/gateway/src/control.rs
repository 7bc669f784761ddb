//! The gateway running on a home, seen from outside it (`kanban gateway reload`, `stop`,
//! `status`): only a process proven to be that home's gateway (its `gateway.lock` is
//! held, and `gateway.pid` names a live process of this user) is signalled.

use std::os::unix::fs::MetadataExt;

use board_home::safety;
use board_home::Home;

use crate::daemon::{try_flock, GatewayError};

/// The pid of the gateway running on `home`, proven as above.
pub fn running_pid(home: &Home) -> Result<libc::pid_t, GatewayError> {
    let not_running = || GatewayError::NotRunning {
        home: home.dir().to_path_buf(),
    };
    // No lock file: no gateway ever ran here (and a home this user cannot write is read
    // without making one).
    if !home.lock_file().exists() {
        return Err(not_running());
    }
    let lock = safety::open_lock(&home.lock_file()).map_err(|source| GatewayError::Io {
        what: "cannot open the gateway lock".into(),
        source,
    })?;
    if try_flock(&lock) {
        return Err(not_running());
    }
    let pid = safety::open_read(&home.pid_file())
        .and_then(std::io::read_to_string)
        .ok()
        .and_then(|text| text.trim().parse::<libc::pid_t>().ok())
        .filter(|pid| *pid > 1)
        .ok_or_else(not_running)?;
    // SAFETY: getuid has no failure and touches no memory.
    let me = unsafe { libc::getuid() };
    match std::fs::metadata(format!("/proc/{pid}")) {
        Ok(meta) if meta.uid() == me => Ok(pid),
        _ => Err(not_running()),
    }
}

/// Asks the gateway running on `home` to re-read its config (SIGHUP); returns its pid.
pub fn reload(home: &Home) -> Result<libc::pid_t, GatewayError> {
    let pid = running_pid(home)?;
    // SAFETY: kill has no memory effects.
    if unsafe { libc::kill(pid, libc::SIGHUP) } != 0 {
        return Err(GatewayError::Io {
            what: format!("cannot signal the gateway (pid {pid})"),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(pid)
}

/// What `kanban gateway status` reports, from `gateway.pid`, the lock and `gateway.json`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// `running`, `stopped` (no gateway, none left a pid behind) or `crashed` (a pid file
    /// left by a gateway that no longer holds the lock).
    pub state: &'static str,
    pub pid: Option<i64>,
    pub uptime_seconds: Option<i64>,
    pub last_tick_age_seconds: Option<i64>,
    pub ticks: Option<u64>,
    pub workers: Option<u64>,
    /// The provider breaker's state as the last tick saw it (`closed`, `open`...).
    pub breaker: Option<String>,
}

/// The state of the gateway on `home`, at `now`. The tick figures are those of the last
/// `gateway.json` (of the running gateway, or of the last one).
pub fn status(home: &Home, now: board_core::Timestamp) -> Result<Status, GatewayError> {
    let file: Option<serde_json::Value> = safety::open_read(&home.status_file())
        .ok()
        .and_then(|f| serde_json::from_reader(f).ok());
    let number = |key: &str| file.as_ref().and_then(|f| f[key].as_i64());
    let (state, pid) = match running_pid(home) {
        Ok(pid) => ("running", Some(i64::from(pid))),
        Err(GatewayError::NotRunning { .. }) => {
            let left = safety::open_read(&home.pid_file())
                .and_then(std::io::read_to_string)
                .ok()
                .and_then(|text| text.trim().parse::<i64>().ok());
            match left {
                Some(pid) => ("crashed", Some(pid)),
                None => ("stopped", None),
            }
        }
        Err(e) => return Err(e),
    };
    Ok(Status {
        state,
        pid,
        uptime_seconds: (state == "running")
            .then(|| number("started_at").map(|t| now - t))
            .flatten(),
        last_tick_age_seconds: number("last_tick_at").map(|t| now - t),
        ticks: file.as_ref().and_then(|f| f["ticks"].as_u64()),
        workers: file.as_ref().and_then(|f| f["workers"].as_u64()),
        breaker: file
            .as_ref()
            .and_then(|f| f["cost_safety"]["breaker"]["state"].as_str())
            .map(str::to_owned),
    })
}

/// Stops the gateway running on `home` (SIGTERM) and waits up to `limit` for it to
/// release the lock; returns its pid.
pub fn stop(home: &Home, limit: std::time::Duration) -> Result<libc::pid_t, GatewayError> {
    let pid = running_pid(home)?;
    // SAFETY: kill has no memory effects.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        return Err(GatewayError::Io {
            what: format!("cannot signal the gateway (pid {pid})"),
            source: std::io::Error::last_os_error(),
        });
    }
    let start = std::time::Instant::now();
    loop {
        match running_pid(home) {
            Err(GatewayError::NotRunning { .. }) => return Ok(pid),
            Err(e) => return Err(e),
            Ok(_) if start.elapsed() > limit => {
                return Err(GatewayError::DidNotStop {
                    home: home.dir().to_path_buf(),
                    pid: pid.to_string(),
                    seconds: limit.as_secs(),
                })
            }
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}
