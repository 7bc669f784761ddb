//! `kanban mcp`: the board's verbs as Model Context Protocol tools, on the official Rust
//! SDK (`rmcp`), over stdio ([`serve_stdio`]) or the streamable HTTP transport
//! ([`http_service`], mounted at `/mcp` by `kanban serve`); and a lane's tools
//! ([`lane_http_service`], at `/api/lanes/mcp`): claim the next task, report on the runs
//! the lane holds.
//!
//! This crate is the protocol only: the tools, their JSON schemas, and the mapping of
//! answers and refusals onto MCP results. What a tool does is the command line's: the
//! [`Verbs`] given to the server are the `kanban` verbs themselves, so a tool's result
//! is that verb's `--json` shape and a refusal is its one-line message.
//!
//! ```no_run
//! # async fn run(verbs: std::sync::Arc<dyn mcp::Verbs>) -> Result<(), mcp::McpError> {
//! mcp::serve_stdio(verbs).await
//! # }
//! ```

mod stdio;
mod tools;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

pub use tools::{
    Approve, BadCall, BlockTask, Call, ClaimNext, Comment, CompleteTask, CreateTask, Heartbeat, HeldTask,
    LinkTasks, ListTasks, OwnTask, RequestChanges, RequestReview, TaskRef, ToolSet, LIST_LIMIT,
    MAX_LIST_LIMIT,
};

/// What the tools do: the board's verbs, each answering with its `--json` value or the
/// one-line message of its refusal. Called on a blocking thread: it may block on the board.
pub trait Verbs: Send + Sync + 'static {
    fn call(&self, call: Call) -> Result<Value, String>;
}

/// A lane's answer to one call, which may wait (a claim sleeps until work is ready).
pub type Answer = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// What a lane's tools do, bound to that lane: its claims and its runs only.
pub trait LaneVerbs: Send + Sync + 'static {
    fn call(&self, call: Call) -> Answer;
}

/// Why the server stopped or did not start.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("the MCP session did not start: {0}")]
    Start(String),
    #[error("the MCP session failed: {0}")]
    Run(String),
}

/// Who answers the calls: the board's verbs on a blocking thread, or a lane's.
#[derive(Clone)]
enum Backend {
    Board(Arc<dyn Verbs>),
    Lane(Arc<dyn LaneVerbs>),
}

/// The MCP server: lists the tools and hands each call to the [`Verbs`] (or a lane's).
#[derive(Clone)]
pub struct Server {
    backend: Backend,
    set: ToolSet,
    tools: Arc<Vec<Tool>>,
}

/// Each set's listing, built once (a lane's server is made per request).
static BOARD_TOOLS: LazyLock<Arc<Vec<Tool>>> = LazyLock::new(|| Arc::new(tools::list(ToolSet::Board)));
static LANE_TOOLS: LazyLock<Arc<Vec<Tool>>> = LazyLock::new(|| Arc::new(tools::list(ToolSet::Lane)));

impl Server {
    pub fn new(verbs: Arc<dyn Verbs>) -> Server {
        Server {
            backend: Backend::Board(verbs),
            set: ToolSet::Board,
            tools: BOARD_TOOLS.clone(),
        }
    }

    /// A lane's server: its tools only, answered by `verbs`.
    pub fn lane(verbs: Arc<dyn LaneVerbs>) -> Server {
        Server {
            backend: Backend::Lane(verbs),
            set: ToolSet::Lane,
            tools: LANE_TOOLS.clone(),
        }
    }

    async fn answer(&self, call: Call) -> Result<Value, String> {
        match &self.backend {
            Backend::Board(verbs) => {
                let verbs = verbs.clone();
                tokio::task::spawn_blocking(move || verbs.call(call))
                    .await
                    .unwrap_or_else(|e| Err(format!("the board call failed: {e}")))
            }
            Backend::Lane(verbs) => verbs.call(call).await,
        }
    }
}

const INSTRUCTIONS: &str = "A kanban board for work done by AI agents. Read a task with \
show_task or task_context, report progress with heartbeat and comment, and finish with \
complete_task (done), request_review (done, for a reviewer to check) or block_task (cannot \
go on). A reviewer answers with approve or request_changes. Inside a worker started by the \
board's gateway, these act on the worker's own task when no task_id is given.";

const LANE_INSTRUCTIONS: &str = "A worker lane of a kanban board. Loop: claim_next (with \
wait_seconds to wait for work), read the task and its context, do the work, then \
complete_task (done), request_review (done, for a reviewer to check) or block_task (cannot \
go on), naming the task_id and run_id the claim gave. Call heartbeat every few minutes of \
long work: a lease that ends gives the task to another claimer and refuses your late report.";

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kanban", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.set {
                ToolSet::Board => INSTRUCTIONS,
                ToolSet::Lane => LANE_INSTRUCTIONS,
            })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = match tools::parse_call(self.set, &request.name, request.arguments) {
            Ok(call) => call,
            // Naming a tool that does not exist is the client's protocol error; wrong
            // arguments are the model's, reported as a tool error it can correct.
            Err(e @ BadCall::UnknownTool(_)) => return Err(ErrorData::invalid_params(e.to_string(), None)),
            Err(e) => return Ok(refused(e.to_string())),
        };
        Ok(match self.answer(call).await {
            Ok(value) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into(),
            Err(message) => refused(message),
        })
    }
}

/// A tool error: the call reached the board and was refused, with the reason.
fn refused(message: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message)]).into()
}

/// Serves the tools on stdin and stdout until the client closes them; a line that is
/// not JSON gets JSON-RPC's parse error (the SDK alone would drop it). Must run inside a
/// tokio runtime with I/O enabled.
pub async fn serve_stdio(verbs: Arc<dyn Verbs>) -> Result<(), McpError> {
    let (sdk_end, writer) = stdio::screen(tokio::io::stdin(), tokio::io::stdout());
    let running = Server::new(verbs)
        .serve(tokio::io::split(sdk_end))
        .await
        .map_err(|e| McpError::Start(e.to_string()))?;
    let ended = running
        .waiting()
        .await
        .map(drop)
        .map_err(|e| McpError::Run(e.to_string()));
    // Every reply written before the server is done.
    let _ = writer.await;
    ended
}

/// The tools over MCP's streamable HTTP transport, as a tower service to mount (`kanban
/// serve` mounts it at `/mcp`, behind its own token, `Host` and origin checks, which is
/// why the transport's own host check is off). Stateless: every request stands alone,
/// answered with plain JSON.
pub fn http_service(verbs: Arc<dyn Verbs>) -> StreamableHttpService<Server, LocalSessionManager> {
    stateless(Server::new(verbs))
}

/// A lane's tools over streamable HTTP, for one request of that lane (the caller checked
/// its token and binds `verbs` to it); stateless and plain JSON, as [`http_service`].
pub fn lane_http_service(verbs: Arc<dyn LaneVerbs>) -> StreamableHttpService<Server, LocalSessionManager> {
    stateless(Server::lane(verbs))
}

fn stateless(server: Server) -> StreamableHttpService<Server, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts();
    StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config)
}
