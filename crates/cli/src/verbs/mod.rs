//! The verbs, one module per group, and what they share: the open board, the clock
//! read once, the output mode, and the worker's identity when run inside a worker.

mod comment;
mod config;
mod context;
mod decompose;
mod gateway_verbs;
mod graph;
mod read;
mod setup;
mod stats;
mod tasks;
mod work;

use board_core::{RunId, TaskId, Timestamp};
use board_home::{now, Config, Home, Loaded};
use board_sqlite::SqliteStore;

use crate::args::Verb;
use crate::failure::Failure;
use crate::output::Paint;

pub use setup::completions;

/// What every verb runs with.
pub struct Ctx {
    pub store: SqliteStore,
    /// The home's config.yaml, every default filled in.
    pub config: Config,
    /// The system clock in Unix seconds, read once per command.
    pub now: Timestamp,
    pub json: bool,
    pub paint: Paint,
}

/// The task and run a worker was spawned for (`KANBAN_TASK`, `KANBAN_RUN_ID`).
#[derive(Clone, Debug)]
pub struct Worker {
    pub task: TaskId,
    pub run: RunId,
}

impl Worker {
    /// The worker's identity when both variables are set; malformed values are a usage error.
    pub fn from_env() -> Result<Option<Worker>, Failure> {
        let (Some(task), Some(run)) = (std::env::var_os("KANBAN_TASK"), std::env::var_os("KANBAN_RUN_ID"))
        else {
            return Ok(None);
        };
        let task = task
            .to_str()
            .and_then(|t| t.parse::<TaskId>().ok())
            .ok_or_else(|| Failure::Usage(format!("KANBAN_TASK is not a task id: {task:?}")))?;
        let run = run
            .to_str()
            .and_then(|r| r.parse::<RunId>().ok())
            .ok_or_else(|| Failure::Usage(format!("KANBAN_RUN_ID is not a run id: {run:?}")))?;
        Ok(Some(Worker { task, run }))
    }
}

/// The task a worker-aware verb acts on, and the run guard its write carries: an explicit
/// `--run` wins; otherwise a worker's own task is guarded by its run.
pub fn target(
    id: Option<TaskId>,
    run: Option<RunId>,
    worker: Option<&Worker>,
    verb: &str,
) -> Result<(TaskId, Option<RunId>), Failure> {
    match (id, worker) {
        (Some(id), Some(w)) if id == w.task => Ok((id, run.or(Some(w.run)))),
        (Some(id), _) => Ok((id, run)),
        (None, Some(w)) => Ok((w.task.clone(), run.or(Some(w.run)))),
        (None, None) => Err(Failure::Usage(format!(
            "{verb} needs a task id (or run it inside a worker, with KANBAN_TASK and KANBAN_RUN_ID set)"
        ))),
    }
}

/// Opens (creating when new) the board and runs the verb.
pub fn run(home: Home, json: bool, verb: Verb) -> Result<(), Failure> {
    // Checking the config opens no board: it must report a config that stops the others.
    let verb = match verb {
        Verb::Config(command) => return config::run(&home, json, command),
        verb => verb,
    };
    // The database is opened before the template is written, so a home whose
    // `kanban.db` is refused (not SQLite, another application's, newer) is left
    // untouched. Config warnings are left to `config check` and the gateway, so that a
    // worker's every `kanban` call does not repeat them.
    let opened = home.open()?;
    let created = setup::Created {
        home: opened.created_home,
        config: home.write_template()?,
    };
    let Loaded { config, warnings } = opened.loaded;
    let ctx = Ctx {
        store: opened.store,
        config,
        now: now(),
        json,
        paint: Paint::for_stdout(),
    };
    match verb {
        Verb::Init => setup::init(&ctx, &home, created),
        Verb::Completions { shell } => completions(&shell),
        Verb::Create(a) => tasks::create(&ctx, a),
        Verb::Edit(a) => tasks::edit(&ctx, a),
        Verb::Assign { id, profile } => tasks::assign(&ctx, id, profile),
        Verb::Archive { ids } => tasks::archive(&ctx, ids),
        Verb::List(a) => read::list(&ctx, a),
        Verb::Show { id } => read::show(&ctx, &id),
        Verb::Runs { id } => read::runs(&ctx, &id),
        Verb::Events { id, follow } => read::events(&ctx, id, follow),
        Verb::Context { id } => context::context(&ctx, id),
        Verb::Stats => stats::stats(&ctx),
        Verb::Link { parent, child } => graph::link(&ctx, &parent, &child),
        Verb::Unlink { parent, child } => graph::unlink(&ctx, &parent, &child),
        Verb::Claim { id, ttl } => work::claim(&ctx, &id, ttl),
        Verb::Heartbeat { id, run, note } => work::heartbeat(&ctx, id, run, note),
        Verb::Complete(a) => work::complete(&ctx, a),
        Verb::Block(a) => work::block(&ctx, a),
        Verb::Unblock { ids, reason } => work::unblock(&ctx, ids, reason),
        Verb::Reclaim { id, run, reason } => work::reclaim(&ctx, &id, run, reason),
        Verb::Comment(a) => comment::comment(&ctx, a),
        Verb::Decompose(a) => decompose::run(ctx, a, decompose::Call::Decompose),
        Verb::Specify(a) => decompose::run(ctx, a, decompose::Call::Specify),
        Verb::Dispatch { dry_run } => gateway_verbs::dispatch(ctx, &home, dry_run),
        Verb::Gateway(command) => gateway_verbs::run(ctx, &home, warnings, command),
        Verb::Config(command) => config::run(&home, json, command),
    }
}

/// Refuses a body, result or comment over `kanban.max_text_bytes` before the board is
/// touched: a card is read whole by every `list` and every worker's brief.
pub fn within_cap(ctx: &Ctx, what: &str, text: &str) -> Result<(), Failure> {
    check_size(what, text.len(), ctx.config.kanban.max_text_bytes)
}

fn check_size(what: &str, bytes: usize, cap: usize) -> Result<(), Failure> {
    if bytes <= cap {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "{what} is over the {cap}-byte limit (kanban.max_text_bytes); shorten it or raise the limit"
    )))
}

/// A task id given as a free word (where a positional may be an id or text).
pub fn parse_id(text: &str) -> Result<TaskId, Failure> {
    text.parse::<TaskId>().map_err(|e| Failure::Usage(e.to_string()))
}

/// The end of a verb that acted on several tasks: one refusal is returned to be
/// printed like any other; several are printed here, one line each.
pub fn settle(mut refused: Vec<Failure>) -> Result<(), Failure> {
    match refused.len() {
        0 => Ok(()),
        1 => Err(refused.remove(0)),
        _ => {
            for failure in &refused {
                if let Some(message) = failure.message() {
                    eprintln!("kanban: {message}");
                }
            }
            Err(Failure::Reported)
        }
    }
}
