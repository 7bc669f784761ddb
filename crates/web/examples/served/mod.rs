//! What the web crate's benchmarks share: `kanban serve` started on a home xtask
//! prepared, its memory, and the arguments every benchmark takes.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The token the benchmark's server requires.
pub const TOKEN: &str = "bench-token-5b1e0c9d7a3f42e8";

/// `kanban serve` on a port of its own, stopped when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(kanban: &Path, home: &Path) -> Result<Server, String> {
        let mut child = Command::new(kanban)
            .arg("--home")
            .arg(home)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("KANBAN_SERVE_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start kanban serve: {e}"))?;
        let stdout = child.stdout.take().ok_or("kanban serve has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading kanban serve's address: {e}"))?;
        let base = line
            .trim()
            .strip_prefix("serving the board at ")
            .map(|b| b.trim_end_matches('/').to_owned())
            .ok_or_else(|| format!("kanban serve printed {line:?}"))?;
        Ok(Server { child, base })
    }

    pub fn rss_mib(&self) -> Result<f64, String> {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .ok_or_else(|| format!("{path} has no VmRSS"))
    }
}

pub struct Args {
    pub kanban: PathBuf,
    pub home: PathBuf,
    pub runs: usize,
}

pub fn args() -> Result<Args, String> {
    let mut kanban = None;
    let mut home = None;
    let mut runs = 5;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--kanban" => kanban = Some(PathBuf::from(value)),
            "--home" => home = Some(PathBuf::from(value)),
            "--runs" => runs = value.parse().map_err(|_| format!("--runs {value:?}"))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(Args {
        kanban: kanban.ok_or("--kanban is required")?,
        home: home.ok_or("--home is required")?,
        runs,
    })
}

/// A benchmark's end: its figures as one JSON line, or its failure and exit code 1.
pub fn report(name: &str, result: Result<serde_json::Value, String>) {
    match result {
        Ok(figures) => println!("{figures}"),
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(1);
        }
    }
}
