//! `kanban serve`: the board over HTTP. A JSON API with the command line's `--json`
//! shapes, a Server-Sent Events stream of the board's events, the pages (board, card
//! detail, stats) embedded in the binary, and the MCP tools at `/mcp` when given. The
//! store and settings (the model of the decompose action among them) are given; this
//! crate never reads a home or a config file itself.
//!
//! ```no_run
//! # async fn run(store: std::sync::Arc<dyn board_core::Store>) -> Result<(), web::ServeError> {
//! let settings = web::Settings::default();
//! web::serve(store, settings, web::DEFAULT_BIND.parse().unwrap(), None).await
//! # }
//! ```

mod api;
mod cards;
mod error;
mod events;
mod guard;
mod html;
mod pages;
mod stats;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use board_core::{NoWorkers, Store, Terminator, Timestamp};
use decompose::{DecomposerSettings, HttpModel};
use tokio::net::TcpListener;

pub use error::ApiError;
/// The token and loopback rule as an axum middleware, for other servers of the board
/// (the gateway's metrics) to share: `from_fn_with_state(Access::new(token, ip), check_access)`.
pub use guard::{check as check_access, Access};

/// Where `kanban serve` listens unless told otherwise.
pub const DEFAULT_BIND: &str = "127.0.0.1:8420";

/// The environment variable `kanban serve` reads its token from.
pub const TOKEN_ENV: &str = "KANBAN_SERVE_TOKEN";

/// Where `kanban serve` takes a token from, as its refusals name it.
pub const SERVE_TOKEN_SOURCES: &str = "KANBAN_SERVE_TOKEN or --token";

/// How the server treats the board it is given.
#[derive(Clone)]
pub struct Settings {
    /// The largest body, comment or result accepted (`kanban.max_text_bytes`).
    pub max_text_bytes: usize,
    /// The largest request body read at all; anything longer is refused unread.
    pub max_request_bytes: usize,
    /// How often the board's events are polled for the event streams.
    pub poll_interval: Duration,
    /// Stops a running task's worker before a reclaim.
    pub terminator: Arc<dyn Terminator + Send + Sync>,
    /// Where the workers' logs are (`<home>/logs`), for a running card's log tail.
    pub logs_dir: Option<PathBuf>,
    /// The decomposer's daily spend ceilings, shown on the stats page.
    pub ceilings: board_core::Ceilings,
    /// The model the decompose action calls, or why there is none (the refusal shown).
    pub decomposer: Result<Arc<Decomposer>, String>,
    /// Secrets the server knows of (the model key, the token): masked out of what it
    /// shows from outside the board, a worker's log.
    pub secrets: Vec<String>,
    /// The verbs behind the MCP tools served at `/mcp` (streamable HTTP); none, no `/mcp`.
    pub mcp: Option<Arc<dyn mcp::Verbs>>,
    /// The assignee of a card created without one, triage cards aside
    /// (`kanban.default_assignee`); none leaves it unassigned.
    pub default_assignee: Option<String>,
    /// What the server holds at once, and how long it waits for a request's headers.
    pub limits: Limits,
}

/// What one server holds at once, so that no client (a flood of half-open connections,
/// thousands of event streams) can take its descriptors or memory from the rest: a
/// connection beyond the cap waits in the kernel's queue until one ends, a stream beyond
/// its cap is refused (503), and a connection that has not sent a request's headers
/// within the header timeout (or sits idle that long between requests) is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub connections: usize,
    pub streams: usize,
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 512,
            streams: 256,
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// The refusal of the decompose action on a server given no model.
pub const NO_MODEL: &str =
    "this server has no model to decompose with; use `kanban decompose`, which reads the home's config";

/// The decompose action's model: the settings and client `kanban decompose` builds.
pub struct Decomposer {
    pub settings: DecomposerSettings,
    pub client: HttpModel,
}

impl Decomposer {
    /// The client for `settings`, or the refusal `kanban decompose` gives for them.
    pub fn new(settings: DecomposerSettings) -> Result<Decomposer, String> {
        let client = HttpModel::new(&settings).map_err(|e| e.to_string())?;
        Ok(Decomposer { settings, client })
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_text_bytes: 64 * 1024,
            max_request_bytes: 256 * 1024,
            poll_interval: Duration::from_millis(100),
            terminator: Arc::new(NoWorkers),
            logs_dir: None,
            ceilings: board_core::Ceilings::default(),
            decomposer: Err(NO_MODEL.to_owned()),
            secrets: Vec::new(),
            mcp: None,
            default_assignee: None,
            limits: Limits::default(),
        }
    }
}

/// Why the server did not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{addr} is not a loopback address: set a token ({variable}) before serving it")]
    TokenRequired {
        addr: SocketAddr,
        /// Where the token comes from, as its server names it.
        variable: &'static str,
    },
    #[error(
        "the token is too easy to guess: use at least {MIN_TOKEN_CHARS} characters, no spaces, \
         not a short pattern repeated (`openssl rand -hex 16` makes one)"
    )]
    WeakToken,
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct App {
    pub store: Arc<dyn Store>,
    pub settings: Settings,
    /// The newest event id seen by the poller; event streams wait on its changes.
    pub newest_event: tokio::sync::watch::Receiver<i64>,
    /// One permit per event stream open, [`Limits::streams`] in all.
    pub streams: Arc<tokio::sync::Semaphore>,
}

/// The shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Refuses a bind that would expose the board without a token (`variable` says where a
/// token comes from, for the message), and a token easy to guess: shorter than
/// [`MIN_TOKEN_CHARS`], holding whitespace or control characters, or made of fewer than
/// eight distinct characters (`aaaa…`, `abababab…`).
pub fn check_bind(addr: SocketAddr, token: Option<&str>, variable: &'static str) -> Result<(), ServeError> {
    match token {
        Some(token) => check_token(token),
        None if addr.ip().is_loopback() => Ok(()),
        None => Err(ServeError::TokenRequired { addr, variable }),
    }
}

fn check_token(token: &str) -> Result<(), ServeError> {
    let distinct: std::collections::BTreeSet<char> = token.chars().collect();
    let plain = !token.chars().any(|c| c.is_whitespace() || c.is_control());
    if token.chars().count() >= MIN_TOKEN_CHARS && plain && distinct.len() >= 8 {
        Ok(())
    } else {
        Err(ServeError::WeakToken)
    }
}

/// Listens on `bind` and serves the board until the process ends.
pub async fn serve(
    store: Arc<dyn Store>,
    settings: Settings,
    bind: SocketAddr,
    token: Option<String>,
) -> Result<(), ServeError> {
    check_bind(bind, token.as_deref(), SERVE_TOKEN_SOURCES)?;
    let listener = TcpListener::bind(bind)
        .await
        .map_err(|source| ServeError::Bind { addr: bind, source })?;
    serve_on(listener, store, settings, token).await
}

/// Serves the board on a listener already bound (tests bind port 0 and read it back).
pub async fn serve_on(
    listener: TcpListener,
    store: Arc<dyn Store>,
    settings: Settings,
    token: Option<String>,
) -> Result<(), ServeError> {
    let local = listener.local_addr()?;
    check_bind(local, token.as_deref(), SERVE_TOKEN_SOURCES)?;
    let limits = settings.limits;
    let app = router(store, settings, local.ip(), token);
    serve_connections(listener, app, limits).await
}

/// Serves `app` on every connection `listener` accepts, within `limits`: at most
/// `limits.connections` at once (the next waits to be accepted until one ends), each
/// closed when it takes longer than `limits.header_timeout` to send a request's headers
/// or sits idle that long between requests. Runs until the process ends.
pub async fn serve_connections(listener: TcpListener, app: Router, limits: Limits) -> Result<(), ServeError> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.connections.max(1)));
    loop {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| ServeError::Io(std::io::Error::other(e)))?;
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, or a peer gone before it was accepted: the server
                // goes on, after a pause that keeps a persistent error from spinning.
                tracing::warn!(error = %e, "could not accept a connection");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            if let Err(e) = http.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(error = %e, "a connection ended early");
            }
            drop(slot);
        });
    }
}

/// How long the server waits after a failed accept before the next.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The whole site: pages, assets, API and event stream, behind the token and origin
/// checks. Must be called inside a tokio runtime: it starts the event poller.
fn router(store: Arc<dyn Store>, settings: Settings, bound: IpAddr, token: Option<String>) -> Router {
    let newest_event = events::start_poller(store.clone(), settings.poll_interval);
    let limit = settings.max_request_bytes;
    let app = App {
        streams: Arc::new(tokio::sync::Semaphore::new(settings.limits.streams)),
        store,
        settings,
        newest_event,
    };
    let access = guard::Access::new(token, bound);
    let mcp = app.settings.mcp.clone();
    let routes = match mcp {
        Some(verbs) => Router::new().nest_service("/mcp", mcp::http_service(verbs)),
        None => Router::new(),
    };
    routes
        .merge(api::routes())
        .merge(cards::routes())
        .merge(pages::routes())
        .merge(stats::routes())
        .route("/api/events", axum::routing::get(events::stream))
        .fallback(error::not_found)
        .with_state(app)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(access, guard::check))
}

/// The system clock in Unix seconds.
pub(crate) fn now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as Timestamp)
}

/// Runs a blocking store call off the async workers.
pub(crate) async fn blocking<T, F>(app: &App, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&dyn Store) -> Result<T, ApiError> + Send + 'static,
{
    let store = app.store.clone();
    tokio::task::spawn_blocking(move || f(store.as_ref()))
        .await
        .map_err(|e| ApiError::internal(format!("a board call failed: {e}")))?
}
