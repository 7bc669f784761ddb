//! A PostgreSQL server of a test's own, to restart under running gateways: a cluster made
//! with `initdb` in a temporary directory, its postmaster run as the `postgres` user on
//! a free loopback port, as a child of the test that dies with it (the kernel sends it
//! SIGKILL when the test process ends, however it ends). Trust authentication, `fsync`
//! off: a scratch server.
//!
//! [`PrivateServer::restart`] is a fast shutdown (SIGINT: sessions are terminated,
//! transactions in flight roll back) and a start on the same data and port.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server gets to start or stop.
const SETTLE: Duration = Duration::from_secs(30);

pub struct PrivateServer {
    dir: tempfile::TempDir,
    port: u16,
    postmaster: Option<Child>,
}

/// The `postgres` user's uid and gid: the server refuses to run as root.
fn postgres_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("a private PostgreSQL server needs the `postgres` user (Debian: postgresql)");
    let fields: Vec<&str> = line.split(':').collect();
    (fields[2].parse().unwrap(), fields[3].parse().unwrap())
}

/// A program of the newest PostgreSQL installed (`/usr/lib/postgresql/<version>/bin`).
fn program(name: &str) -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let path = e.path().join("bin").join(name);
            path.exists().then_some((version, path))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, path)| path)
        .unwrap_or_else(|| panic!("a private PostgreSQL server needs {name} (Debian: postgresql)"))
}

/// `program` run as the `postgres` user.
fn as_postgres(program: &Path, home: &Path) -> Command {
    let (uid, gid) = postgres_user();
    let mut command = Command::new(program);
    command
        .uid(uid)
        .gid(gid)
        .current_dir(home)
        .env("HOME", home)
        .stdin(Stdio::null());
    command
}

impl PrivateServer {
    /// Makes a cluster and starts its server.
    pub fn start() -> PrivateServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (uid, gid) = postgres_user();
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        let init = as_postgres(&program("initdb"), dir.path())
            .args([
                "-D",
                "data",
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()
            .expect("initdb");
        assert!(init.status.success(), "initdb: {init:?}");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = PrivateServer {
            dir,
            port,
            postmaster: None,
        };
        server.run();
        server
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A fast shutdown and a start on the same data and port; returns once it accepts
    /// connections again.
    pub fn restart(&mut self) {
        self.stop(libc::SIGINT);
        self.run();
    }

    fn run(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("the server log");
        let port = self.port.to_string();
        let socket_dir = self.dir.path().display().to_string();
        let mut command = as_postgres(&program("postgres"), self.dir.path());
        command
            .args(["-D", "data", "-p", &port, "-k", &socket_dir])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=100",
            ])
            .stdout(Stdio::null())
            .stderr(log);
        // SAFETY: prctl in the child before exec, after its uid changed (which would
        // clear the setting): the postmaster dies with the test process.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        self.postmaster = Some(command.spawn().expect("postgres"));
        let start = Instant::now();
        while !self.ready() {
            assert!(
                start.elapsed() < SETTLE,
                "the private server did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn ready(&self) -> bool {
        Command::new(program("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .status()
            .is_ok_and(|s| s.success())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Stops the postmaster with `signal` (SIGINT: fast; SIGQUIT: immediate) and waits.
    fn stop(&mut self, signal: i32) {
        let Some(mut postmaster) = self.postmaster.take() else {
            return;
        };
        // SAFETY: signalling the postmaster this server started.
        unsafe { libc::kill(postmaster.id() as i32, signal) };
        let start = Instant::now();
        while postmaster.try_wait().expect("waiting for postgres").is_none() {
            if start.elapsed() > SETTLE {
                let _ = postmaster.kill();
                let _ = postmaster.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.stop(libc::SIGQUIT);
    }
}
