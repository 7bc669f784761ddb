//! `kanban mcp`: the verbs as Model Context Protocol tools (the `mcp` crate) on stdin and
//! stdout. Each tool is the verb's own function on the board this command opened, so its
//! answer is the verb's `--json` shape and a refusal is the verb's one-line message.
//! `kanban serve` offers the same tools at `/mcp`.

use std::sync::{Arc, Mutex};

use board_core::shapes::{comment_json, list_json, Shown};
use board_core::{BlockKind, Status, Store, TaskId};
use board_home::{now, Config, Home};
use mcp::Call;
use serde_json::Value;

use crate::args::{parse_duration, CompleteArgs, CreateArgs, ListArgs};
use crate::failure::{one_line, Failure};
use crate::output::Paint;
use crate::verbs::work::Finished;
use crate::verbs::{
    comment, context, decompose, graph, identity, parse_id, read, review, target, tasks, work, Ctx, Desk,
    Worker,
};
use gateway::channel::CheckReport;

/// Serves the tools on stdio until the client closes them. Inside a worker the worker's
/// task and run are the default target and guard, as for the verbs themselves, and its
/// reports go the way the verbs' do (the report channel, else the home).
pub fn serve(ctx: Ctx, home: Home) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    let tools: Arc<dyn mcp::Verbs> = Arc::new(Tools::new(ctx.store, ctx.config, worker, home));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Refused(format!("cannot start the MCP server: {e}")))?;
    runtime
        .block_on(mcp::serve_stdio(tools))
        .map_err(|e| Failure::Refused(one_line(&e.to_string())))
}

/// The verbs the tools call, on one board; the clock is read at each call.
pub struct Tools {
    store: Arc<dyn Store>,
    config: Config,
    worker: Option<Worker>,
    /// Where the worker verbs report, as `kanban complete` and the others do; one for the
    /// server's life, since it holds the inherited report channel.
    desk: Mutex<Desk>,
    /// Whether `decompose_task` may call the model (not on a shared server).
    model_calls: bool,
}

impl Tools {
    /// The tools of `kanban mcp`: `worker` is the identity of the worker the server runs
    /// inside, if any.
    pub fn new(store: Arc<dyn Store>, config: Config, worker: Option<Worker>, home: Home) -> Tools {
        Tools {
            store,
            config,
            worker,
            desk: Mutex::new(Desk::new(home, true, now())),
            model_calls: true,
        }
    }

    /// The tools of `kanban serve`: nobody's worker, and no model calls, which need the
    /// model key a served board never uses on a caller's behalf (docs/web.md).
    pub fn served(store: Arc<dyn Store>, config: Config, home: Home) -> Tools {
        Tools {
            worker: None,
            model_calls: false,
            ..Tools::new(store, config, None, home)
        }
    }

    fn ctx(&self) -> Ctx {
        Ctx {
            store: self.store.clone(),
            config: self.config.clone(),
            now: now(),
            json: true,
            paint: Paint::for_stdout(),
        }
    }

    fn answer(&self, call: Call) -> Result<Value, Failure> {
        let ctx = self.ctx();
        let worker = self.worker.as_ref();
        // A poisoned lock only means another call panicked; the desk itself is intact.
        let mut desk = self.desk.lock().unwrap_or_else(|e| e.into_inner());
        desk.now = ctx.now;
        let desk = &*desk;
        match call {
            Call::ListTasks(a) => list_tasks(&ctx, a),
            Call::ShowTask(a) => Ok(Shown::read(ctx.store.as_ref(), &parse_id(&a.task_id)?)?.to_json()),
            Call::TaskContext(a) => context::context_json(desk, optional_id(a.task_id)?, worker),
            Call::CreateTask(a) => create_task(&ctx, a),
            Call::Comment(a) => {
                let id = optional_id(a.task_id)?;
                let c = comment::add_comment(desk, id, &a.text, a.author.as_deref(), worker)?;
                Ok(comment_json(&c))
            }
            Call::Heartbeat(a) => {
                let id = optional_id(a.task_id)?;
                answered(desk, "heartbeat", work::beat(desk, id, a.run_id, a.note, worker)?)
            }
            Call::CompleteTask(a) => {
                let args = CompleteArgs {
                    ids: Vec::new(),
                    run: a.run_id,
                    replay_run: None,
                    result: a.result,
                    summary: a.summary,
                    metadata: a.metadata,
                    evidence: a.evidence,
                };
                if let Some(result) = &args.result {
                    desk.within_cap("the result", result)?;
                }
                let (id, guard) = target(optional_id(a.task_id)?, a.run_id, worker, "complete")?;
                // Holding no run, the caller may not finish another worker's.
                let done = work::complete_one(desk, id, guard, guard.is_none(), &args)?;
                answered(desk, "complete", done)
            }
            Call::RequestReview(a) => {
                let check = CheckReport::RequestReview {
                    reviewer: a.reviewer,
                    summary: a.summary,
                    result: a.result,
                };
                let id = optional_id(a.task_id)?;
                answered(desk, "request-review", review::checked(desk, "request-review", (id, a.run_id), &check)?)
            }
            Call::Approve(a) => {
                let check = CheckReport::Approve { summary: a.summary };
                let id = optional_id(a.task_id)?;
                answered(desk, "approve", review::checked(desk, "approve", (id, a.run_id), &check)?)
            }
            Call::RequestChanges(a) => {
                let check = CheckReport::RequestChanges {
                    reason: a.reason,
                    author: Some(identity::caller()),
                };
                let id = optional_id(a.task_id)?;
                let verb = "request-changes";
                answered(desk, verb, review::checked(desk, verb, (id, a.run_id), &check)?)
            }
            Call::BlockTask(a) => {
                let kind = a.kind.as_deref().map(parse_word::<BlockKind>).transpose()?;
                let id = optional_id(a.task_id)?;
                answered(desk, "block", work::block_one(desk, id, a.reason, kind, a.run_id, worker)?)
            }
            Call::DecomposeTask(_) if !self.model_calls => Err(Failure::Refused(
                "kanban serve makes no model calls: decompose with `kanban decompose ID` or through `kanban mcp`".to_owned(),
            )),
            Call::DecomposeTask(a) => decompose::decompose_json(&ctx, &parse_id(&a.task_id)?),
            Call::LinkTasks(a) => graph::linked(&ctx, &parse_id(&a.parent_id)?, &parse_id(&a.child_id)?),
            // The board's tool set lists neither: they are a lane's, at /api/lanes/mcp.
            Call::ClaimNext(_) | Call::HeldContext(_) => Err(Failure::Usage(
                "a lane's tool: lanes claim at /api/lanes/mcp with their own token".to_owned(),
            )),
        }
    }
}

/// `list_tasks`: a page of `kanban list --json`.
fn list_tasks(ctx: &Ctx, a: mcp::ListTasks) -> Result<Value, Failure> {
    let args = ListArgs {
        status: a.status.as_deref().map(parse_word::<Status>).transpose()?,
        assignee: a.assignee,
        mine: false,
        archived: a.archived,
        tenant: a.tenant,
        sort: None,
        limit: Some(list_limit(a.limit)?),
        after: a.after.as_deref().map(parse_id).transpose()?,
        jsonl: false,
    };
    Ok(list_json(&read::listed(ctx, args)?))
}

/// `create_task`: `kanban create --json`.
fn create_task(ctx: &Ctx, a: mcp::CreateTask) -> Result<Value, Failure> {
    let args = CreateArgs {
        title: a.title,
        body: Some(a.body),
        body_file: None,
        assignee: a.assignee,
        created_by: None,
        parents: a.parents.iter().map(|p| parse_id(p)).collect::<Result<_, _>>()?,
        priority: a.priority,
        triage: a.triage,
        idempotency_key: a.idempotency_key,
        max_runtime: a
            .max_runtime
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|e| Failure::Usage(e.to_string()))?,
        reviewer: a.reviewer,
        // Verifiers are commands the gateway runs: set by people on the command line only.
        verify: Vec::new(),
        no_verify: false,
        tenant: a.tenant,
        skills: a.skills,
        max_retries: a.max_retries,
        initial_status: None,
        workspace: None,
        branch: None,
        goal: false,
        template: None,
        workers: None,
    };
    Ok(tasks::creation_json(&tasks::create_task(ctx, args)?))
}

impl mcp::Verbs for Tools {
    fn call(&self, call: Call) -> Result<Value, String> {
        self.answer(call)
            .map_err(|failure| one_line(failure.message().unwrap_or("refused")))
    }
}

/// A guarded finaliser's `{"task_id", "ok": true}`, or its loss as the verb's refusal.
fn answered(desk: &Desk, verb: &str, finished: Finished) -> Result<Value, Failure> {
    finished.won(desk, verb)?;
    Ok(finished.to_json())
}

/// The page size of a `list_tasks` call: its `limit`, else the default; at most the cap.
fn list_limit(limit: Option<u64>) -> Result<u64, Failure> {
    match limit.unwrap_or(mcp::LIST_LIMIT) {
        n @ 1..=mcp::MAX_LIST_LIMIT => Ok(n),
        n => Err(Failure::Usage(format!(
            "limit: {n} is out of range (1 to {})",
            mcp::MAX_LIST_LIMIT
        ))),
    }
}

fn optional_id(id: Option<String>) -> Result<Option<TaskId>, Failure> {
    id.as_deref().map(parse_id).transpose()
}

/// A word of the board's vocabulary (a status, a block kind), with its own message.
fn parse_word<T: std::str::FromStr>(word: &str) -> Result<T, Failure>
where
    T::Err: std::fmt::Display,
{
    word.parse::<T>().map_err(|e| Failure::Usage(e.to_string()))
}
