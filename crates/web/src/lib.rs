//! `kanban serve`: the board over HTTP. A JSON API with the command line's `--json`
//! shapes, a Server-Sent Events stream of the board's events, the pages (board, card
//! detail, stats) embedded in the binary, and the MCP tools at `/mcp` when given. The
//! store, the settings (the model of the decompose action among them) and the clock are
//! given; this crate never reads a home, a config file or the system clock itself.
//!
//! ```no_run
//! # async fn run(store: std::sync::Arc<dyn board_core::Store>, clock: web::Clock) -> Result<(), web::ServeError> {
//! let settings = web::Settings::default();
//! web::serve(store, settings, clock, web::DEFAULT_BIND.parse().unwrap(), None).await
//! # }
//! ```

mod api;
mod bulk;
mod cards;
mod error;
mod events;
mod files;
mod graph;
mod html;
mod lanes;
mod log;
mod pages;
mod stats;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use board_core::{NoWorkers, Store, TaskId, Terminator, Timestamp};
use decompose::{DecomposerSettings, HttpModel};
use tokio::net::TcpListener;

pub use board_core::shapes::LogSpan;
pub use error::ApiError;
pub use http_guard::{check_bind, Limits, ServeError, MIN_TOKEN_CHARS};
pub use lanes::{claim_json as lane_claim_json, LaneSettings};

/// How a card's worker log is read: at most `max` bytes from `from` on (from its start
/// when the log is shorter than `from`: a rotated log), or its last `max` bytes for no
/// `from`; `None` when the card has no log. Called as `read(id, from, max)`.
pub type LogRead = Arc<dyn Fn(&TaskId, Option<u64>, u64) -> Option<LogSpan> + Send + Sync>;

/// How much of a card's worker log its page shows when it opens.
pub const LOG_TAIL_BYTES: u64 = 8 * 1024;

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
    /// How often the board's events are polled for the event streams (and at once on each
    /// of the board's wake-ups, when [`LaneSettings::wakes`] hears them).
    pub poll_interval: Duration,
    /// Stops a running task's worker before a reclaim.
    pub terminator: Arc<dyn Terminator + Send + Sync>,
    /// Reads a card's worker log: its end on the card's page, then what is appended, as it
    /// is, over `/api/tasks/{id}/log`. The caller knows the home and opens its files
    /// safely; none shows no log.
    pub log: Option<LogRead>,
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
    /// The profiles this home can run (a `command`, or `external` for lanes); a ready
    /// card assigned to another is marked as waiting for one. `None`: not known, no mark.
    pub runnable: Option<std::collections::BTreeSet<String>>,
    /// Rounds of requested changes at which a task is blocked (`kanban.review_round_limit`).
    pub review_round_limit: i64,
    /// How lanes are answered at `/api/lanes/` (docs/lanes.md); none: those routes are 404.
    pub lanes: Option<LaneSettings>,
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
    pub fn new(settings: DecomposerSettings) -> Result<Decomposer, decompose::ClientError> {
        let client = HttpModel::new(&settings)?;
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
            log: None,
            ceilings: board_core::Ceilings::default(),
            decomposer: Err(NO_MODEL.to_owned()),
            secrets: Vec::new(),
            mcp: None,
            default_assignee: None,
            review_round_limit: 3,
            limits: Limits::default(),
            lanes: None,
            runnable: None,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct App {
    pub store: Arc<dyn Store>,
    pub settings: Settings,
    pub clock: Clock,
    /// Where the board's pages are served and the boards beside it.
    pub chrome: Arc<pages::Chrome>,
    /// The newest event id seen by the poller; event streams wait on its changes.
    pub newest_event: tokio::sync::watch::Receiver<i64>,
    /// One permit per event stream open, [`Limits::streams`] in all.
    pub streams: Arc<tokio::sync::Semaphore>,
    /// One permit per lane's claim waiting, [`LaneSettings::max_waiting`] in all.
    pub waiting: Arc<tokio::sync::Semaphore>,
}

/// One board of several a server serves (docs/boards.md): its slug and display name, its
/// store, and how it is served.
pub struct ServedBoard {
    pub slug: String,
    pub name: String,
    pub store: Arc<dyn Store>,
    pub settings: Settings,
}

/// Listens on `bind` and serves the board until the process ends.
pub async fn serve(
    store: Arc<dyn Store>,
    settings: Settings,
    clock: Clock,
    bind: SocketAddr,
    token: Option<String>,
) -> Result<(), ServeError> {
    check_bind(bind, token.as_deref(), SERVE_TOKEN_SOURCES)?;
    let listener = TcpListener::bind(bind)
        .await
        .map_err(|source| ServeError::Bind { addr: bind, source })?;
    serve_on(listener, store, settings, clock, token).await
}

/// Serves the board on a listener already bound (tests bind port 0 and read it back).
pub async fn serve_on(
    listener: TcpListener,
    store: Arc<dyn Store>,
    settings: Settings,
    clock: Clock,
    token: Option<String>,
) -> Result<(), ServeError> {
    let board = ServedBoard {
        slug: "default".into(),
        name: "Default".into(),
        store,
        settings,
    };
    serve_boards_on(listener, vec![board], "default", clock, token).await
}

/// Serves several boards on a listener already bound: each under `/b/SLUG/`, and
/// `current` at the root too (its API where a single board's is); every page carries a
/// switcher to the others. With one board, it is served at the root alone.
pub async fn serve_boards_on(
    listener: TcpListener,
    boards: Vec<ServedBoard>,
    current: &str,
    clock: Clock,
    token: Option<String>,
) -> Result<(), ServeError> {
    let local = listener.local_addr()?;
    check_bind(local, token.as_deref(), SERVE_TOKEN_SOURCES)?;
    let limits = boards
        .iter()
        .find(|b| b.slug == current)
        .or(boards.first())
        .map_or_else(Limits::default, |b| b.settings.limits);
    let app = router(boards, current, clock, http_guard::Access::new(token, local.ip()));
    http_guard::serve_connections(listener, app, limits).await
}

/// The whole site: each board's pages, assets, API and event stream, behind the token
/// and origin checks, and its lanes' routes beside them. Must be called inside a tokio
/// runtime: it starts each board's event poller.
fn router(boards: Vec<ServedBoard>, current: &str, clock: Clock, access: http_guard::Access) -> Router {
    let several = boards.len() > 1;
    let listed: Vec<(String, String)> = match several {
        true => boards.iter().map(|b| (b.slug.clone(), b.name.clone())).collect(),
        false => Vec::new(),
    };
    let (mut site, mut lanes) = (Router::new(), Router::new());
    for board in boards {
        let chrome = pages::Chrome {
            base: if several {
                format!("/b/{}", board.slug)
            } else {
                String::new()
            },
            slug: board.slug.clone(),
            name: board.name.clone(),
            boards: listed.clone(),
        };
        let (pages, lane_routes) = board_routes(board.store, board.settings, clock, chrome);
        if several {
            let home = format!("/b/{}", board.slug);
            // The board's address with a slash after it is the same page.
            let to = home.clone();
            site = site.route(
                &format!("{home}/"),
                axum::routing::get(move || async move { axum::response::Redirect::permanent(&to) }),
            );
            site = site.nest(&home, pages.clone());
            lanes = lanes.nest(&format!("/b/{}", board.slug), lane_routes.clone());
        }
        if board.slug == current || !several {
            site = site.merge(pages);
            lanes = lanes.merge(lane_routes);
        }
    }
    let site = site
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn_with_state(
            access,
            http_guard::check_access,
        ));
    lanes.merge(site)
}

/// One board's routes: its pages and API (behind the board's guard once mounted), and its
/// lanes' routes, which present their own token, not the board's (`lanes::Caller`).
fn board_routes(
    store: Arc<dyn Store>,
    settings: Settings,
    clock: Clock,
    chrome: pages::Chrome,
) -> (Router, Router) {
    let wakes = settings.lanes.as_ref().map(|l| l.wakes.clone());
    let newest_event = events::start_poller(store.clone(), settings.poll_interval, wakes);
    let limit = settings.max_request_bytes;
    let app = App {
        streams: Arc::new(tokio::sync::Semaphore::new(settings.limits.streams)),
        waiting: Arc::new(tokio::sync::Semaphore::new(
            settings.lanes.as_ref().map_or(0, |l| l.max_waiting),
        )),
        store,
        settings,
        clock,
        chrome: Arc::new(chrome),
        newest_event,
    };
    let mcp = app.settings.mcp.clone();
    let routes = match mcp {
        Some(verbs) => Router::new().nest_service("/mcp", mcp::http_service(verbs)),
        None => Router::new(),
    };
    let lanes = lanes::routes()
        .with_state(app.clone())
        .layer(DefaultBodyLimit::max(limit));
    let board = routes
        .merge(api::routes())
        .merge(bulk::routes())
        .merge(cards::routes())
        .merge(files::routes())
        .merge(pages::routes())
        .merge(stats::routes())
        .route("/api/events", axum::routing::get(events::stream))
        .route("/api/tasks/{id}/log", axum::routing::get(log::stream))
        .with_state(app)
        .layer(DefaultBodyLimit::max(limit));
    (board, lanes)
}

/// The clock the server stamps its writes and reads "now" with, in Unix seconds: the
/// caller's (the command line's is `board_home::now`), so that one clock serves the board.
pub type Clock = fn() -> Timestamp;

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
