//! The web board's benchmark (`cargo xtask bench --only web`), in headless Chromium
//! driven over WebDriver like the browser tests: the first render of a board, a CLI
//! write reaching the open page over the event stream, and the server's memory idle and
//! with 100 open event streams. It runs the release `kanban serve` on a home xtask
//! prepared and prints one JSON line of samples.
//!
//! `bench_web --kanban PATH --home DIR --runs N`

#[path = "../tests/webdriver/mod.rs"]
mod webdriver;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use webdriver::Driver;

const STREAMS: usize = 100;

/// `kanban serve` on a port of its own, stopped when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(kanban: &Path, home: &Path) -> Result<Server, String> {
        let mut child = Command::new(kanban)
            .arg("--home")
            .arg(home)
            .args(["serve", "--bind", "127.0.0.1:0"])
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

    fn rss_mib(&self) -> Result<f64, String> {
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

struct Args {
    kanban: PathBuf,
    home: PathBuf,
    runs: usize,
}

fn args() -> Result<Args, String> {
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

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Navigation start to the frame that painted every card; also the board's card count.
async fn first_render(browser: &Driver, base: &str) -> Result<(f64, u64), String> {
    browser.go(&format!("{base}/")).await?;
    let painted = browser
        .until(
            "the board painted",
            "const m = performance.getEntriesByName('kanban:board-painted')[0]; return m ? m.startTime : null;",
            json!([]),
        )
        .await?;
    let cards = browser
        .script("return document.querySelectorAll('.card').length", json!([]))
        .await?;
    Ok((
        painted.as_f64().ok_or("a mark without a time")?,
        cards.as_u64().unwrap_or(0),
    ))
}

/// From the start of `kanban create` to its card in the open page, and the CLI alone.
async fn cli_to_page(browser: &Driver, a: &Args, runs: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    browser
        .script(
            "window.seen = {};
             new MutationObserver((changes) => {
               const at = performance.timeOrigin + performance.now();
               for (const c of changes) for (const n of c.addedNodes) {
                 const t = n.querySelector && n.querySelector('.title');
                 if (t && !(t.textContent in window.seen)) window.seen[t.textContent] = at;
               }
             }).observe(document.getElementById('board'), { childList: true, subtree: true });
             return true;",
            json!([]),
        )
        .await?;
    let (mut visible, mut cli) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        let title = format!("bench write {run} {}", epoch_ms());
        let started = epoch_ms();
        let out = Command::new(&a.kanban)
            .arg("--home")
            .arg(&a.home)
            .args(["create", &title])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("kanban create: {e}"))?;
        if !out.status.success() {
            return Err(format!("kanban create: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let wrote = epoch_ms();
        let seen = browser
            .until(
                "the new card",
                "return window.seen[arguments[0]] || null",
                json!([title]),
            )
            .await?;
        if run > 0 {
            visible.push(seen.as_f64().ok_or("no time")? - started);
            cli.push(wrote - started);
        }
    }
    Ok((visible, cli))
}

/// The server's RSS idle, then with `STREAMS` event streams open, each having carried
/// an event.
async fn memory(a: &Args) -> Result<(f64, f64), String> {
    let server = Server::start(&a.kanban, &a.home)?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| e.to_string())?;
    let newest: Value = http
        .get(format!("{}/api/cards", server.base))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let after = newest["newest_event"].as_i64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = server.rss_mib()?;
    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        let stream = http
            .get(format!("{}/api/events?after={after}", server.base))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("opening a stream: {e}"))?;
        streams.push(stream);
    }
    let out = Command::new(&a.kanban)
        .arg("--home")
        .arg(&a.home)
        .args(["create", "wakes every stream"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("kanban create: {e}"))?;
    if !out.status.success() {
        return Err(format!("kanban create: {}", String::from_utf8_lossy(&out.stderr)));
    }
    for stream in &mut streams {
        tokio::time::timeout(Duration::from_secs(10), stream.chunk())
            .await
            .map_err(|_| "a stream carried no event within 10 s".to_owned())?
            .map_err(|e| e.to_string())?;
    }
    let busy = server.rss_mib()?;
    drop(streams);
    Ok((idle, busy))
}

async fn measure(a: &Args) -> Result<Value, String> {
    let server = Server::start(&a.kanban, &a.home)?;
    let http = reqwest::Client::new();
    let mut api = Vec::new();
    for run in 0..=a.runs {
        let started = Instant::now();
        http.get(format!("{}/api/cards", server.base))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| e.to_string())?
            .bytes()
            .await
            .map_err(|e| e.to_string())?;
        if run > 0 {
            api.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    let browser = Driver::start().await?;
    let mut render = Vec::new();
    let mut cards = 0;
    for run in 0..=a.runs {
        let (ms, n) = first_render(&browser, &server.base).await?;
        cards = n;
        if run > 0 {
            render.push(ms);
        }
    }
    let (visible, cli) = cli_to_page(&browser, a, a.runs * 4).await?;
    browser.quit().await?;
    drop(server);
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    for _ in 0..a.runs {
        let (i, b) = memory(a).await?;
        idle.push(i);
        busy.push(b);
    }
    Ok(json!({
        "cards": cards,
        "first_render_ms": render,
        "api_cards_ms": api,
        "cli_to_page_ms": visible,
        "cli_write_ms": cli,
        "rss_idle_mib": idle,
        "rss_streams_mib": busy,
        "streams": STREAMS,
    }))
}

#[tokio::main]
async fn main() {
    let result = match args() {
        Ok(a) => measure(&a).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(figures) => println!("{figures}"),
        Err(e) => {
            eprintln!("bench_web: {e}");
            std::process::exit(1);
        }
    }
}
