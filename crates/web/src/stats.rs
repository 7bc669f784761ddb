//! `GET /stats`: the board over time as server-rendered SVG bar charts: tasks finished
//! per hour, time from ready to done, and the LLM bill per day (requests, tokens,
//! failures); and the lanes, each with its state, what it holds and did. Nothing is drawn by a script, so the page works with scripts off. Every
//! figure is an aggregate the store computes; no task, event or ledger row is loaded.

use std::fmt::Write;

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use board_core::shapes::age;
use board_core::spend::window_start;
use board_core::{Ceilings, LlmLedger, Store, StoreResult, Timestamp};

use crate::html::escape;
use crate::pages::{page, shell};
use crate::{blocking, ApiError, App};

const HOUR: i64 = 3600;
const DAY: i64 = 86_400;
/// How many hours the finished-per-hour chart covers, and how many days the bill.
const HOURS: i64 = 24;
const DAYS: i64 = 14;
/// The ready-to-done buckets: upper bounds in seconds, and their labels.
const SPANS: [(i64, &str); 7] = [
    (60, "<1m"),
    (300, "<5m"),
    (900, "<15m"),
    (HOUR, "<1h"),
    (4 * HOUR, "<4h"),
    (DAY, "<1d"),
    (i64::MAX, "≥1d"),
];

pub fn routes() -> Router<App> {
    Router::new().route("/stats", get(stats))
}

async fn stats(State(app): State<App>) -> Result<Response, ApiError> {
    let ceilings = app.settings.ceilings;
    let (chrome, clock) = (app.chrome.clone(), app.clock);
    blocking(&app, move |s| Ok(page(render(s, &chrome, &ceilings, clock())?))).await
}

/// The provider breaker and the last 24 hours' spend against the ceilings, in words.
fn cost_safety(store: &dyn LlmLedger, ceilings: &Ceilings, now: Timestamp) -> StoreResult<String> {
    let breaker = store.breaker()?;
    let day = store.spend(window_start(now))?;
    let mut out = String::from("<section class=\"cost-safety\"><h2>Model provider and spend</h2><ul>");
    let mut state = breaker.state().to_owned();
    if let (true, Some(at)) = (breaker.open, breaker.probe_at) {
        let _ = write!(state, ", next probe in {} s", (at - now).max(0));
    }
    if let (true, Some(error)) = (breaker.open, &breaker.last_error) {
        let _ = write!(state, ": {error}");
    }
    let _ = write!(out, "<li>Breaker: {}</li>", escape(&state));
    let cost = day.cost.map(|c| format!(", cost {c:.4}")).unwrap_or_default();
    let _ = write!(
        out,
        "<li>Last 24 h: {} requests, {} prompt and {} completion tokens{}</li>",
        day.requests, day.prompt_tokens, day.completion_tokens, cost
    );
    let ceiling = match ceilings.reached(&day) {
        Some(reached) => format!("reached: {reached}; automatic decomposition stopped"),
        None if *ceilings == Ceilings::default() => "none set".to_owned(),
        None => "not reached".to_owned(),
    };
    let _ = write!(
        out,
        "<li>Spend ceilings: {}</li></ul></section>",
        escape(&ceiling)
    );
    Ok(out)
}

/// The lanes (docs/lanes.md): each one's state, what it holds and did, when it was last
/// heard from, and its profiles.
fn lanes(store: &dyn Store, now: Timestamp) -> StoreResult<String> {
    let lanes = store.lane_stats()?;
    let mut out = String::from("<section class=\"lanes\"><h2>Lanes</h2>");
    if lanes.is_empty() {
        out.push_str("<p>No lanes: agents outside the gateway claim work through one (<code>kanban lane create NAME --profile PROFILE</code>).</p></section>");
        return Ok(out);
    }
    out.push_str("<table><tr><th>Lane</th><th>State</th><th>Held</th><th>Done</th><th>Failed</th><th>Last seen</th><th>Profiles</th></tr>");
    for l in &lanes {
        let seen = l
            .last_seen()
            .map_or_else(|| "never".to_owned(), |at| format!("{} ago", age(now, at)));
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&l.lane.name),
            l.state(now),
            l.held,
            l.done,
            l.failed,
            escape(&seen),
            escape(&l.lane.profiles.join(", "))
        );
    }
    out.push_str("</table></section>");
    Ok(out)
}

fn render(
    store: &dyn Store,
    chrome: &crate::pages::Chrome,
    ceilings: &Ceilings,
    now: Timestamp,
) -> StoreResult<String> {
    // The last 24 hours up to now, slot 0 the oldest hour: a task done at `now` is in
    // the last slot.
    let since = now - HOURS * HOUR + 1;
    let bounds: Vec<i64> = SPANS.iter().map(|(bound, _)| *bound).collect();
    let mut per_hour = vec![0i64; HOURS as usize];
    let mut spans = vec![0i64; SPANS.len()];
    for f in store.finished(since, HOUR, &bounds)? {
        let tasks = i64::try_from(f.tasks).unwrap_or(i64::MAX);
        if let Some(n) = usize::try_from(f.slot).ok().and_then(|i| per_hour.get_mut(i)) {
            *n += tasks;
        }
        if let Some(n) = spans.get_mut(f.bucket) {
            *n += tasks;
        }
    }
    let hour_labels: Vec<String> = (0..HOURS).map(|i| format!("-{}h", HOURS - i)).collect();
    let span_labels: Vec<String> = SPANS.iter().map(|(_, l)| (*l).to_owned()).collect();
    let bill = daily_bill(store, now)?;
    let day_labels: Vec<String> = (0..DAYS).map(|i| format!("-{}d", DAYS - 1 - i)).collect();

    let mut out = shell(chrome, "kanban stats", None);
    out.push_str("<h1>Stats</h1>");
    out.push_str(&cost_safety(store, ceilings, now)?);
    out.push_str(&lanes(store, now)?);
    let verdicts = store.verdicts()?;
    let count = |outcome: &str| verdicts.get(outcome).copied().unwrap_or(0);
    let _ = write!(
        out,
        "<p class=\"checks\">Checks: {} failed verifications · {} rounds of changes requested</p>",
        count("verify_failed"),
        count("changes_requested")
    );
    out.push_str("<div class=\"charts\">");
    out.push_str(&bar_chart(
        "Tasks finished per hour (last 24 h)",
        &hour_labels,
        &per_hour,
    ));
    out.push_str(&bar_chart(
        "Time from ready to done (last 24 h)",
        &span_labels,
        &spans,
    ));
    out.push_str(&bar_chart("LLM requests per day", &day_labels, &bill.requests));
    out.push_str(&bar_chart("LLM tokens per day", &day_labels, &bill.tokens));
    out.push_str(&bar_chart("LLM failures per day", &day_labels, &bill.failures));
    out.push_str("</div></main></body></html>");
    Ok(out)
}

struct Bill {
    requests: Vec<i64>,
    tokens: Vec<i64>,
    failures: Vec<i64>,
}

/// The last [`DAYS`] UTC days of the ledger, summed by the store per day.
fn daily_bill(store: &dyn LlmLedger, now: Timestamp) -> StoreResult<Bill> {
    let n = DAYS as usize;
    let mut bill = Bill {
        requests: vec![0; n],
        tokens: vec![0; n],
        failures: vec![0; n],
    };
    let today = now.div_euclid(DAY);
    let first_day = today - (DAYS - 1);
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    for day in store.daily_spend(first_day * DAY)? {
        let Some(i) = usize::try_from(day.day - first_day).ok().filter(|i| *i < n) else {
            continue;
        };
        bill.requests[i] = count(day.requests);
        bill.tokens[i] = count(day.tokens);
        bill.failures[i] = count(day.failures);
    }
    Ok(bill)
}

/// One bar chart as inline SVG: a bar per label, its value above it.
fn bar_chart(title: &str, labels: &[String], values: &[i64]) -> String {
    const W: usize = 640;
    const H: usize = 200;
    const TOP: usize = 20;
    const BOTTOM: usize = 30;
    let max = values.iter().copied().max().unwrap_or(0).max(1);
    let slot = W / labels.len().max(1);
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption>{}</figcaption>\
         <svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">",
        escape(title),
        escape(title)
    );
    for (i, (label, value)) in labels.iter().zip(values).enumerate() {
        let height = (H - TOP - BOTTOM) * usize::try_from(*value).unwrap_or(0) / max as usize;
        let x = i * slot + 2;
        let y = H - BOTTOM - height;
        let _ = write!(
            svg,
            "<rect class=\"bar\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{height}\"><title>{label}: {value}</title></rect>\
             <text class=\"label\" x=\"{cx}\" y=\"{ly}\" text-anchor=\"middle\">{label}</text>",
            w = slot.saturating_sub(4),
            cx = x + slot / 2 - 2,
            ly = H - BOTTOM + 14,
            label = escape(label),
        );
        if *value > 0 {
            let _ = write!(
                svg,
                "<text class=\"value\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{value}</text>",
                x + slot / 2 - 2,
                y.saturating_sub(4)
            );
        }
    }
    svg.push_str("</svg></figure>");
    svg
}
