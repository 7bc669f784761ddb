//! Who may reach the board's HTTP ports, and how many at once, for every server of the
//! board (`kanban serve`, the gateway's metrics): the bind rule (no token, loopback
//! only) and the token's strength ([`check_bind`]); the token, `Host` and `Origin`
//! checks on every request, as an axum middleware ([`check_access`] with an
//! [`Access`]); and the accept loop that holds only what it can afford
//! ([`serve_connections`] within [`Limits`]).

mod guard;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

pub use guard::{check as check_access, Access};

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
