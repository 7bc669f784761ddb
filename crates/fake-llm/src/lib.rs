//! A real OpenAI-compatible HTTP server on 127.0.0.1 whose answers are scripted, for
//! tests and demos (docs/testing.md). This file owns the handle, [`FakeLlm`]: starting, the base
//! URL, scripting replies at run time, reading the request log, and shutdown on drop.
//!
//! Endpoints: `POST /v1/chat/completions` (JSON, or SSE when the body has
//! `"stream": true`), `GET /v1/models`, and `GET /_fake/requests` (the request log as a
//! JSON array of [`RecordedRequest`]; `/_fake/` requests are not recorded themselves).
//! Unknown paths get 404 and unreadable bodies 400, both as OpenAI-shaped JSON errors.
//!
//! Which reply a request gets is documented in [`script`]: per-task replies, then the
//! ordered replies, then the responder function, then the default.
//!
//! ```no_run
//! use fake_llm::{FakeLlm, Reply, Settings};
//!
//! # async fn demo() -> std::io::Result<()> {
//! let llm = FakeLlm::start(Settings::default()).await?;
//! llm.push_reply(Reply::error(503, "busy"));
//! llm.push_reply(Reply::text(r#"{"fanout": false, "title": "Done"}"#));
//! // Point the client at llm.base_url(), e.g. http://127.0.0.1:41234/v1
//! let requests = llm.wait_for_requests(2).await;
//! # Ok(())
//! # }
//! ```

mod reply;
mod request_log;
pub mod script;
mod server;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

pub use reply::{Reply, Usage};
pub use request_log::{RecordedBody, RecordedRequest, RequestKind};
pub use script::{Script, ScriptError};
pub use wire::MODEL_ID;

/// How a server starts. `Settings::default()` is an ephemeral port, no API key, 16
/// characters per SSE chunk, no chunk delay and [`Script::default`].
#[derive(Clone, Debug)]
pub struct Settings {
    /// The port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// When set, every `/v1/` request needs `Authorization: Bearer <key>` or gets 401.
    pub api_key: Option<String>,
    /// Characters of content per SSE chunk (0 counts as 1).
    pub chunk_chars: usize,
    /// Wait before each SSE content chunk.
    pub chunk_delay: Duration,
    /// The replies the server starts with.
    pub script: Script,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            port: 0,
            api_key: None,
            chunk_chars: 16,
            chunk_delay: Duration::ZERO,
            script: Script::default(),
        }
    }
}

/// A running fake server. Dropping it shuts the server down: the listener closes and
/// open connections (hanging or stalled ones included) are cut.
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    /// Dropping the sender is the shutdown signal every task watches.
    shutdown: Option<watch::Sender<()>>,
    /// The server's own thread, for [`FakeLlm::start_blocking`].
    thread: Option<JoinHandle<()>>,
}

impl FakeLlm {
    /// Starts a server on the current tokio runtime.
    ///
    /// The server shares that runtime, so the caller must not block it (for example with
    /// a synchronous HTTP client on a current-thread runtime); use
    /// [`FakeLlm::start_blocking`] then. After a drop, the listener closes the next time
    /// the runtime runs the server's task.
    pub async fn start(settings: Settings) -> std::io::Result<FakeLlm> {
        let (listener, shared) = server::bind(settings).await?;
        let addr = listener.local_addr()?;
        let (shutdown, watcher) = watch::channel(());
        tokio::spawn(server::serve(listener, Arc::clone(&shared), watcher));
        Ok(FakeLlm {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: None,
        })
    }

    /// Starts a server on its own thread with its own runtime, for synchronous callers.
    /// Dropping the handle waits for that thread to finish, so the port is closed when
    /// the drop returns.
    pub fn start_blocking(settings: Settings) -> std::io::Result<FakeLlm> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (listener, shared) = runtime.block_on(server::bind(settings))?;
        let addr = listener.local_addr()?;
        let (shutdown, watcher) = watch::channel(());
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fake-llm-{}", addr.port()))
            .spawn(move || runtime.block_on(server::serve(listener, serving, watcher)))?;
        Ok(FakeLlm {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The bound address (always 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI base URL, e.g. `http://127.0.0.1:41234/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Appends a reply to the ordered replies (each used once).
    pub fn push_reply(&self, reply: Reply) {
        self.shared.script().push_reply(reply);
    }

    /// Replaces the reply used when nothing else applies.
    pub fn set_default_reply(&self, reply: Reply) {
        self.shared.script().set_default(reply);
    }

    /// Replaces the replies for one task id (`t_<hex>`): used in order, the last one
    /// repeating. An empty list removes the task's replies.
    pub fn script_task(&self, task_id: impl Into<String>, replies: Vec<Reply>) {
        self.shared.script().script_task(task_id.into(), replies);
    }

    /// Sets the function that picks replies once the per-task and ordered replies do
    /// not apply (it replaces the default). A panic in it is answered with 500.
    pub fn respond_with(&self, responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) {
        self.shared.script().set_responder(Some(Arc::new(responder)));
    }

    /// Sets a callback run for every recorded request after it is recorded and before
    /// it is answered, on a blocking thread (it may do blocking work, such as changing
    /// a database while "the model is thinking"). The reply waits for it.
    pub fn on_request(&self, hook: impl Fn(&RecordedRequest) + Send + Sync + 'static) {
        self.shared.set_hook(Arc::new(hook));
    }

    /// Every request recorded so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.snapshot()
    }

    /// Waits until at least `count` requests are recorded, then returns them all.
    pub async fn wait_for_requests(&self, count: usize) -> Vec<RecordedRequest> {
        self.shared.log.wait_for(count).await
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        drop(self.shutdown.take());
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread has already been reported by the panic hook.
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLlm").field("addr", &self.addr).finish()
    }
}
