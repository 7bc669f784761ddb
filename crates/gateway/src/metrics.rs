//! The gateway's health and metrics over HTTP (docs/gateway.md#health-and-metrics), off
//! unless `gateway.metrics_bind` is set: `GET /healthz` (200 while ticks are on time and
//! the store answers, else 503) and `GET /metrics` in the Prometheus text format. The
//! bind and token rule is `kanban serve`'s (`http_guard::check_bind`, `http_guard::check_access`).
//!
//! The gateway's own counts (ticks, spawns, reclaims...) live in a [`Monitor`] the tick
//! loop feeds; the board's counts (tasks by status, runs by outcome, model requests and
//! tokens) are read at each scrape with `Store::tally`, one SQL aggregate each.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use board_core::breaker::Breaker;
use board_core::{EventKind, Status, Store, Tally};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::planner::TickReport;

/// The variable holding the token `/healthz` and `/metrics` require (required when
/// `gateway.metrics_bind` is not a loopback address).
pub const TOKEN_ENV: &str = "KANBAN_METRICS_TOKEN";

/// The content type of the Prometheus text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The connections `/healthz` and `/metrics` serve at once (scrapers need one or two).
const METRICS_CONNECTIONS: usize = 32;

/// A tick older than this many intervals makes the gateway unhealthy.
const LATE_TICKS: u32 = 3;

/// The gateway's own counters, fed by the tick loop.
#[derive(Debug, Default)]
struct GatewayMetrics {
    ticks: Counter,
    tick_failures: Counter,
    spawns: Counter,
    reaps: Counter,
    reclaims: Counter,
    timeouts: Counter,
    promotions: Counter,
    decompositions_started: Counter,
    workers: Gauge,
    decompositions_in_flight: Gauge,
}

/// When the last tick ended and how it went, for `/healthz`.
#[derive(Debug)]
struct Pulse {
    last_tick: Option<Instant>,
    interval: Duration,
    store_failing: bool,
    started: Instant,
}

/// What the tick loop tells the HTTP side: shared between them behind an `Arc`.
pub struct Monitor {
    registry: Mutex<Registry>,
    gateway: GatewayMetrics,
    tick_seconds: Histogram,
    board: Arc<BoardTally>,
    pulse: Mutex<Pulse>,
}

impl Monitor {
    /// A monitor for a gateway ticking every `interval` on `store`.
    pub fn new(store: Arc<dyn Store>, interval: Duration) -> Arc<Monitor> {
        let gateway = GatewayMetrics::default();
        let tick_seconds = Histogram::new(exponential_buckets(0.001, 4.0, 9));
        let board = Arc::new(BoardTally {
            store,
            tally: Mutex::new(Tally::default()),
            breaker: Mutex::new(Breaker::default()),
        });
        let mut registry = Registry::with_prefix("kanban");
        let g = &gateway;
        let counters = [
            ("ticks", "Dispatcher ticks run", &g.ticks),
            (
                "tick_failures",
                "Ticks with a failing step (a store error)",
                &g.tick_failures,
            ),
            ("spawns", "Workers spawned", &g.spawns),
            ("reaps", "Workers that exited and were reaped", &g.reaps),
            (
                "reclaims",
                "Runs reclaimed (expired leases, dead workers)",
                &g.reclaims,
            ),
            ("timeouts", "Workers stopped past their max runtime", &g.timeouts),
            ("promotions", "Tasks promoted to ready", &g.promotions),
            (
                "decompositions_started",
                "Automatic decompositions started",
                &g.decompositions_started,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(name, help, counter.clone());
        }
        registry.register_with_unit(
            "tick_duration",
            "How long a tick took",
            Unit::Seconds,
            tick_seconds.clone(),
        );
        registry.register("workers_running", "Workers the gateway holds", g.workers.clone());
        registry.register(
            "decompositions_in_flight",
            "Automatic decompositions running in the background",
            g.decompositions_in_flight.clone(),
        );
        // Board-wide state kept by other parts of the gateway (a decomposition breaker,
        // a spend ceiling) registers its own metrics here, beside these.
        registry.register_collector(Box::new(board.clone()));
        Arc::new(Monitor {
            registry: Mutex::new(registry),
            gateway,
            tick_seconds,
            board,
            pulse: Mutex::new(Pulse {
                last_tick: None,
                interval,
                store_failing: false,
                started: Instant::now(),
            }),
        })
    }

    /// Counts one finished tick.
    pub fn tick(&self, report: &TickReport, took: Duration, workers: usize) {
        let g = &self.gateway;
        g.ticks.inc();
        self.tick_seconds.observe(took.as_secs_f64());
        if !report.errors.is_empty() {
            g.tick_failures.inc();
        }
        let count = |c: &Counter, items: usize| c.inc_by(items as u64);
        count(&g.spawns, report.spawned.len());
        count(&g.reaps, report.reaped.len());
        count(&g.reclaims, report.reclaimed.len());
        count(&g.timeouts, report.timed_out.len());
        count(&g.promotions, report.promoted.len());
        count(&g.decompositions_started, report.decompositions_started.len());
        g.workers.set(workers as i64);
        g.decompositions_in_flight
            .set(report.decompositions_in_flight as i64);
        let mut pulse = lock(&self.pulse);
        pulse.last_tick = Some(Instant::now());
        pulse.store_failing = !report.errors.is_empty();
    }

    /// A reloaded config's tick interval, which `/healthz` measures lateness in.
    pub fn set_interval(&self, interval: Duration) {
        lock(&self.pulse).interval = interval;
    }

    /// `None` when healthy, else why not.
    fn unhealthy(&self) -> Option<String> {
        let pulse = lock(&self.pulse);
        let limit = pulse.interval * LATE_TICKS;
        let since = pulse.last_tick.unwrap_or(pulse.started);
        let age = since.elapsed();
        if age > limit {
            let what = if pulse.last_tick.is_some() {
                "the last tick"
            } else {
                "the start, with no tick yet,"
            };
            return Some(format!(
                "{what} was {:.1} s ago, more than {LATE_TICKS} intervals ({:.1} s)",
                age.as_secs_f64(),
                limit.as_secs_f64()
            ));
        }
        pulse
            .store_failing
            .then(|| "the last tick's store steps failed".to_owned())
    }

    /// The metrics in the text format, the board's counts read now.
    fn scrape(&self) -> Result<String, String> {
        let store = &self.board.store;
        let tally = store
            .tally()
            .map_err(|e| format!("cannot count the board: {e}"))?;
        let breaker = store
            .breaker()
            .map_err(|e| format!("cannot read the provider breaker: {e}"))?;
        let registry = lock(&self.registry);
        *lock(&self.board.tally) = tally;
        *lock(&self.board.breaker) = breaker;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).map_err(|e| e.to_string())?;
        Ok(text)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The board's counts and its provider breaker, set from one `Store::tally` and one
/// `Store::breaker` just before each encoding.
struct BoardTally {
    store: Arc<dyn Store>,
    tally: Mutex<Tally>,
    breaker: Mutex<Breaker>,
}

impl std::fmt::Debug for BoardTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoardTally").field("tally", &self.tally).finish()
    }
}

impl Collector for BoardTally {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let tally = lock(&self.tally);
        // Every status, zero included, so a query never finds a series missing.
        let tasks: Vec<(&str, u64)> = Status::ALL
            .iter()
            .map(|s| (s.as_str(), tally.tasks.get(s.as_str()).copied().unwrap_or(0)))
            .collect();
        let mut family =
            encoder.encode_descriptor("tasks", "Tasks on the board by status", None, MetricType::Gauge)?;
        for (status, n) in tasks {
            ConstGauge::new(n as i64).encode(family.encode_family(&[("status", status)])?)?;
        }
        let counters: [LabelledCounter<'_>; 4] = [
            (
                "runs_ended",
                "Runs ended, by outcome",
                "outcome",
                pairs(&tally.runs),
            ),
            (
                "llm_requests",
                "Model requests billed, by outcome",
                "outcome",
                pairs(&tally.llm_calls),
            ),
            (
                "llm_tokens",
                "Tokens the model reported, by kind",
                "kind",
                vec![
                    ("prompt", tally.prompt_tokens),
                    ("completion", tally.completion_tokens),
                ],
            ),
            (
                "decompositions",
                "Decompositions ended, by outcome, on the board",
                "outcome",
                decomposition_outcomes(&tally.decompositions),
            ),
        ];
        for (name, help, label, values) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (value, n) in values {
                ConstCounter::new(n).encode(family.encode_family(&[(label, value)])?)?;
            }
        }
        let failures: u64 = tally
            .llm_calls
            .iter()
            .filter(|(outcome, _)| *outcome != "ok")
            .map(|(_, n)| n)
            .sum();
        let family = encoder.encode_descriptor(
            "llm_failures",
            "Model requests billed that did not succeed",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(failures).encode(family)?;
        encode_breaker(&lock(&self.breaker), &mut encoder)
    }
}

/// The decomposition events by kind as outcomes that add up: `split` (a fan-out),
/// `specified` (one tightened task), `failed` (an automatic one that failed and will be
/// retried) and `parked` (one that failed at the limit and parked its card).
fn decomposition_outcomes(kinds: &std::collections::BTreeMap<String, u64>) -> Vec<(&'static str, u64)> {
    let count = |kind: EventKind| kinds.get(kind.as_str()).copied().unwrap_or(0);
    let parked = count(EventKind::AutoDecomposeParked);
    vec![
        ("split", count(EventKind::Decomposed)),
        ("specified", count(EventKind::Specified)),
        (
            "failed",
            count(EventKind::AutoDecomposeFailed).saturating_sub(parked),
        ),
        ("parked", parked),
    ]
}

/// The provider breaker: open or not, and while open when the next probe may go.
fn encode_breaker(breaker: &Breaker, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let family = encoder.encode_descriptor(
        "breaker_open",
        "Whether the decomposer's provider breaker is open (automatic decompositions paused)",
        None,
        MetricType::Gauge,
    )?;
    ConstGauge::new(i64::from(breaker.open)).encode(family)?;
    if let (true, Some(at)) = (breaker.open, breaker.probe_at) {
        let family = encoder.encode_descriptor(
            "breaker_next_probe_timestamp",
            "When the open breaker may send its next probe (Unix time)",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        ConstGauge::new(at).encode(family)?;
    }
    Ok(())
}

/// A counter family: name, help, its label and each label value's count.
type LabelledCounter<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, u64)>);

fn pairs(map: &std::collections::BTreeMap<String, u64>) -> Vec<(&str, u64)> {
    map.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

/// Why the metrics server could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("gateway.metrics_bind: {0}")]
    Bind(#[from] http_guard::ServeError),
    #[error("gateway.metrics_bind: cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Binds `addr` (refused off loopback without a token) and serves `/healthz` and
/// `/metrics` on the current runtime until the process ends. Returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    token: Option<String>,
    monitor: Arc<Monitor>,
) -> Result<SocketAddr, MetricsError> {
    http_guard::check_bind(addr, token.as_deref(), TOKEN_ENV)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Listen { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| MetricsError::Listen { addr, source })?;
    let access = http_guard::Access::new(token, local.ip());
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(monitor)
        .layer(axum::middleware::from_fn_with_state(
            access,
            http_guard::check_access,
        ));
    // Few connections, each closed if it stalls: a flood of half-open connections to
    // this port cannot take the descriptors the gateway spawns its workers with.
    let limits = http_guard::Limits {
        connections: METRICS_CONNECTIONS,
        streams: 0,
        ..http_guard::Limits::default()
    };
    tokio::spawn(async move {
        if let Err(e) = http_guard::serve_connections(listener, app, limits).await {
            tracing::error!(error = %e, "the metrics server stopped");
        }
    });
    Ok(local)
}

async fn healthz(State(monitor): State<Arc<Monitor>>) -> Response {
    match monitor.unhealthy() {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("unhealthy: {why}\n")).into_response(),
    }
}

async fn metrics(State(monitor): State<Arc<Monitor>>) -> Response {
    // The board is counted through the synchronous store: off the async threads.
    let scraped = tokio::task::spawn_blocking(move || monitor.scrape()).await;
    match scraped {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response(),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_public_bind_without_a_token_is_refused_naming_the_metrics_variable() {
        let store: Arc<dyn Store> = Arc::new(board_core::memory::MemStore::new());
        let monitor = Monitor::new(store, Duration::from_secs(1));
        let refused = serve("0.0.0.0:0".parse().unwrap(), None, monitor)
            .await
            .expect_err("a public bind without a token");
        let message = refused.to_string();
        assert!(message.contains(TOKEN_ENV), "{message}");
        assert!(!message.contains("KANBAN_SERVE_TOKEN"), "{message}");
    }
}
