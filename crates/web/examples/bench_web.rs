//! The web board's benchmark (`cargo xtask bench --only web`), in headless Chromium
//! driven over WebDriver like the browser tests: the first render of a board as a user
//! opening it sees it and the page's weight, a CLI write reaching the open page over the
//! event stream, a card's drawer opening, and the server's memory idle and with 100 open
//! event streams. It runs the release `kanban serve` on a home xtask prepared and prints
//! one JSON line of samples.
//!
//! Each first render is a browser started for it (an empty profile, so nothing cached)
//! navigating to the board once. A script installed before the page's own watches the
//! DOM from the first byte: the render ends at the first frame after the board holds
//! every card of the first page of each column, the number the bench reads from
//! `/api/cards` itself. The page's card count and column counts are then checked
//! against that API's.
//!
//! `bench_web --kanban PATH --home DIR --runs N`

#[path = "served/mod.rs"]
mod served;
#[path = "../tests/webdriver/mod.rs"]
mod webdriver;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use served::{args, Args, Server, TOKEN};
use webdriver::Driver;

const STREAMS: usize = 100;

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The cards the page asks for per column (board.js's page size).
const PAGE: usize = 200;

/// One column as `/api/cards` gives it: the cards of its first page and its total.
struct Column {
    status: &'static str,
    shown: usize,
    total: u64,
}

impl Column {
    /// The column's count as the page should show it.
    fn count(&self) -> String {
        if self.total > self.shown as u64 {
            format!("{} of {}", self.shown, self.total)
        } else {
            self.shown.to_string()
        }
    }
}

/// A client that presents [`TOKEN`] with every request.
fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {TOKEN}").parse().map_err(|e| format!("{e}"))?;
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    reqwest::Client::builder()
        .timeout(timeout)
        .default_headers(headers)
        .build()
        .map_err(|e| e.to_string())
}

/// A JSON answer of the server; anything else is an error.
async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    http.get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("GET {url}: {e}"))?
        .json()
        .await
        .map_err(|e| format!("GET {url}: {e}"))
}

/// The request the page makes to draw the board: the first page of each column it shows
/// (archived is behind a toggle), in one read.
async fn first_pages(http: &reqwest::Client, base: &str) -> Result<Vec<Column>, String> {
    let page = get_json(http, &format!("{base}/api/columns?limit={PAGE}")).await?;
    let mut columns = Vec::new();
    for status in board_core::Status::ALL {
        if *status == board_core::Status::Archived {
            continue;
        }
        let status = status.as_str();
        let column = page["columns"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["status"] == status))
            .ok_or_else(|| format!("/api/columns has no {status} column"))?;
        let shown = column["cards"].as_array().map_or(0, Vec::len);
        let total = column["total"]
            .as_u64()
            .ok_or_else(|| format!("/api/columns' {status} column has no total"))?;
        columns.push(Column { status, shown, total });
    }
    Ok(columns)
}

/// Installed before the page's scripts: resolves `window.kanbanRendered` with the time
/// from navigation start to the DOM first holding `EXPECTED` cards, and to the end of the
/// frame that follows (the one that paints them).
const WATCH: &str = "window.kanbanRendered = new Promise((resolve) => {
  const cards = document.getElementsByClassName('card');
  const watch = new MutationObserver(() => {
    if (cards.length < EXPECTED) return;
    watch.disconnect();
    const dom = performance.now();
    requestAnimationFrame(() => setTimeout(() => resolve({ dom, painted: performance.now() }), 0));
  });
  watch.observe(document, { childList: true, subtree: true });
});";

/// What the page shows once rendered: its cards, and each shown column's count; and
/// where its time went (ms from navigation start): its HTML parsed and scripts run
/// (DOMContentLoaded), and its read of the columns, from its start to its end.
const SHOWN: &str = "const reads = performance.getEntriesByType('resource')
  .filter((r) => r.name.includes('/api/columns'));
return {
  cards: document.querySelectorAll('#board .card').length,
  columns: [...document.querySelectorAll('#board .column')].filter((c) => !c.hidden)
    .map((c) => [c.dataset.status, c.querySelector('.count').textContent]),
  loaded: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
  reads_start: reads.length ? reads[0].startTime : null,
  reads_end: reads.length ? Math.max(...reads.map((r) => r.responseEnd)) : null,
  weight: [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
    .filter((r) => !r.name.includes('/api/'))
    .map((r) => [new URL(r.name).pathname, r.encodedBodySize]),
  data: reads.reduce((sum, r) => sum + r.encodedBodySize, 0),
};";

/// One first render: its times (ms from navigation start) and what the page showed.
struct Render {
    dom: f64,
    painted: f64,
    shown: Value,
}

/// A browser started for this render opens the board once.
async fn first_render(base: &str, expected: usize) -> Result<Render, String> {
    let browser = Driver::start().await?;
    let rendered = async {
        browser
            .on_new_document(&WATCH.replace("EXPECTED", &expected.to_string()))
            .await?;
        browser.go(&format!("{base}/?token={TOKEN}")).await?;
        let times = browser.script("return window.kanbanRendered", json!([])).await;
        let shown = browser.script(SHOWN, json!([])).await?;
        let times = times.map_err(|e| match e.contains("script timeout") {
            true => format!(
                "the page never held {expected} cards within chromedriver's script timeout \
                 (30 s); it shows {shown}"
            ),
            false => e,
        })?;
        let at = |key: &str| times[key].as_f64().ok_or_else(|| format!("no {key} in {times}"));
        Ok::<_, String>(Render {
            dom: at("dom")?,
            painted: at("painted")?,
            shown,
        })
    }
    .await;
    browser.quit().await?;
    rendered
}

/// Fails unless the page showed exactly the cards and counts the API gives.
fn check_shown(shown: &Value, columns: &[Column], expected: usize) -> Result<(), String> {
    let cards = shown["cards"].as_u64().unwrap_or(0);
    let counts: Vec<(String, String)> = columns.iter().map(|c| (c.status.to_owned(), c.count())).collect();
    let page: Vec<(String, String)> = serde_json::from_value(shown["columns"].clone())
        .map_err(|e| format!("the page's columns {}: {e}", shown["columns"]))?;
    if cards != expected as u64 || page != counts {
        return Err(format!(
            "the page shows {cards} cards and counts {page:?}; /api/cards gives {expected} \
             and {counts:?}"
        ));
    }
    Ok(())
}

/// From the start of `kanban create` to its card in the open page, and the CLI alone.
async fn cli_to_page(
    browser: &Driver,
    base: &str,
    a: &Args,
    runs: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    browser.go(&format!("{base}/?token={TOKEN}")).await?;
    browser
        .until(
            "the event stream connected",
            "return document.getElementById('live').textContent.includes('live')",
            json!([]),
        )
        .await?;
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

/// Opens a card in the board's drawer by a click on its title: the time from the click to
/// the first frame after the drawer holds the card's article.
const OPEN_DRAWER: &str = "const id = arguments[0];
const drawer = document.getElementById('drawer');
const title = document.querySelector('#card-' + CSS.escape(id) + ' .title');
return new Promise((resolve) => {
  const start = performance.now();
  const watch = new MutationObserver(() => {
    const article = drawer.querySelector('article.detail');
    if (!article || article.dataset.id !== id) return;
    watch.disconnect();
    requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - start), 0));
  });
  watch.observe(drawer, { childList: true, subtree: true });
  title.click();
});";

/// The drawer opened on the first cards of the open board, each closed again; and the
/// drawer's HTML read alone for the same cards. The first of each is a warm-up.
async fn drawer_opens(browser: &Driver, base: &str, runs: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    let ids = browser
        .script(
            "return [...document.querySelectorAll('#board .card')].map((c) => c.dataset.id).slice(0, arguments[0])",
            json!([runs + 1]),
        )
        .await?;
    let ids: Vec<String> = serde_json::from_value(ids).map_err(|e| e.to_string())?;
    let http = client(Duration::from_secs(60))?;
    let (mut opened, mut read) = (Vec::new(), Vec::new());
    for (run, id) in ids.iter().enumerate() {
        let took = browser.script(OPEN_DRAWER, json!([id])).await?;
        browser
            .script(
                "document.getElementById('drawer-close').click(); return true;",
                json!([]),
            )
            .await?;
        let started = Instant::now();
        let page = http
            .get(format!("{base}/tasks/{id}/drawer"))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("the drawer of {id}: {e}"))?;
        page.bytes().await.map_err(|e| e.to_string())?;
        if run > 0 {
            opened.push(took.as_f64().ok_or("no drawer time")?);
            read.push(ms_since(started));
        }
    }
    if opened.len() < runs {
        return Err(format!("only {} cards to open", ids.len()));
    }
    Ok((opened, read))
}

/// The server's RSS idle, then with `STREAMS` event streams open, each having carried
/// an event.
async fn memory(a: &Args) -> Result<(f64, f64), String> {
    let server = Server::start(&a.kanban, &a.home)?;
    let http = client(Duration::from_secs(60))?;
    let newest = get_json(&http, &format!("{}/api/cards", server.base)).await?;
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

fn ms_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

/// The page's own reads (the first page of each column), then first renders of it, each
/// in a browser of its own; the first of each is a warm-up.
async fn renders(a: &Args, base: &str) -> Result<Value, String> {
    let http = client(Duration::from_secs(60))?;
    let (mut api, mut columns) = (Vec::new(), Vec::new());
    for run in 0..=a.runs {
        let started = Instant::now();
        columns = first_pages(&http, base).await?;
        if run > 0 {
            api.push(ms_since(started));
        }
    }
    let expected: usize = columns.iter().map(|c| c.shown).sum();
    if expected == 0 {
        return Err("the board has no card to draw".to_owned());
    }
    let (mut dom, mut painted, mut shown) = (Vec::new(), Vec::new(), Value::Null);
    let mut phases: [Vec<Value>; 3] = Default::default();
    for run in 0..=a.runs {
        let render = first_render(base, expected).await?;
        check_shown(&render.shown, &columns, expected)?;
        if run > 0 {
            dom.push(render.dom);
            painted.push(render.painted);
            for (samples, key) in phases.iter_mut().zip(["loaded", "reads_start", "reads_end"]) {
                samples.push(render.shown[key].clone());
            }
        }
        shown = render.shown;
    }
    let [loaded, reads_start, reads_end] = phases;
    Ok(json!({
        "weight": shown["weight"],
        "data_bytes": shown["data"],
        "cards": shown["cards"],
        "columns": shown["columns"],
        "api_columns_ms": api,
        "first_render_dom_ms": dom,
        "first_render_ms": painted,
        "dom_content_loaded_ms": loaded,
        "page_reads_start_ms": reads_start,
        "page_reads_end_ms": reads_end,
    }))
}

async fn measure(a: &Args) -> Result<Value, String> {
    let server = Server::start(&a.kanban, &a.home)?;
    let mut figures = renders(a, &server.base).await?;
    let browser = Driver::start().await?;
    // One open page for both; the browser quits whichever way they end.
    let in_page = async {
        let writes = cli_to_page(&browser, &server.base, a, a.runs * 4).await?;
        Ok::<_, String>((writes, drawer_opens(&browser, &server.base, a.runs).await?))
    }
    .await;
    browser.quit().await?;
    let ((visible, cli), (opened, read)) = in_page?;
    drop(server);
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    for _ in 0..a.runs {
        let (i, b) = memory(a).await?;
        idle.push(i);
        busy.push(b);
    }
    figures["cli_to_page_ms"] = json!(visible);
    figures["cli_write_ms"] = json!(cli);
    figures["drawer_open_ms"] = json!(opened);
    figures["drawer_read_ms"] = json!(read);
    figures["rss_idle_mib"] = json!(idle);
    figures["rss_streams_mib"] = json!(busy);
    figures["streams"] = json!(STREAMS);
    Ok(figures)
}

#[tokio::main]
async fn main() {
    let result = match args() {
        Ok(a) => measure(&a).await,
        Err(e) => Err(e),
    };
    served::report("bench_web", result);
}
