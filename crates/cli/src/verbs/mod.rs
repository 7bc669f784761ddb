//! The verbs, one module per group, and what they share: the open board, the clock
//! read once, the output mode, and the worker's identity when run inside a worker.

mod attachments;
pub mod boards;
mod by_hand;
mod comment;
mod config;
mod context;
mod decompose;
mod desk;
mod diagnostics;
mod gateway_service;
mod gateway_verbs;
mod gc;
mod graph;
mod identity;
mod import_hermes;
mod lanes;
mod listing;
mod mcp;
mod migrate;
mod notify;
mod profiles;
mod read;
mod review;
mod serve;
mod setup;
mod stats;
mod swarm;
mod tasks;
mod verify;
mod work;

use std::sync::Arc;

use board_core::{RunId, Store, TaskId, Timestamp};
use board_home::config::text_within_cap;
use board_home::{now, Config, Home, Loaded, Warning};

use crate::args::Verb;
use crate::failure::Failure;
use crate::output::Paint;

pub use desk::Desk;
pub use diagnostics::Severity;
pub use identity::caller;
pub use setup::{completions, man};

/// What every verb runs with.
pub struct Ctx {
    pub store: Arc<dyn Store>,
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
        let (Some(task), Some(run)) = (
            std::env::var_os(board_home::worker_variables::TASK),
            std::env::var_os(board_home::worker_variables::RUN),
        ) else {
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

/// Verbs that only read (or only say what they would do): on a home with no board they
/// are refused, never make one, so a mistyped home is not shown as an empty board.
fn only_reads(verb: &Verb) -> bool {
    use crate::args::{GatewayCommand, LaneCommand};
    match verb {
        Verb::List(_)
        | Verb::Show { .. }
        | Verb::Runs { .. }
        | Verb::Events(_)
        | Verb::Stats
        | Verb::Assignees
        | Verb::Log { .. }
        | Verb::Tail { .. }
        | Verb::Watch(_)
        | Verb::Attachments { .. }
        | Verb::NotifyList
        | Verb::AttachGet { .. }
        | Verb::Mcp => true,
        Verb::Gateway(GatewayCommand::Status) | Verb::Lane(LaneCommand::List) => true,
        Verb::Dispatch { dry_run, .. } => *dry_run,
        Verb::Gc(a) => a.dry_run,
        Verb::Promote(a) => a.dry_run,
        Verb::Diagnostics(_) => true,
        // Inside a worker the home may be unreadable on purpose: the report channel reads.
        Verb::Context { .. } => std::env::var_os(board_home::worker_variables::TASK).is_none(),
        _ => false,
    }
}

/// Whether the home holds a board or names one: its SQLite file, or a config (which may
/// name a PostgreSQL board), or `KANBAN_DATABASE_URL`. A home that is not a directory is
/// left to the open to refuse, with its own reason.
fn has_board(home: &Home) -> bool {
    let dir = home.dir();
    (dir.exists() && !dir.is_dir())
        || home.database().exists()
        || board_home::Config::path(dir).exists()
        || std::env::var_os(board_home::DATABASE_URL_VARIABLE).is_some_and(|v| !v.is_empty())
}

fn no_board(home: &Home) -> Failure {
    Failure::Refused(format!(
        "no board at {} (kanban init creates one; --home or KANBAN_HOME names another)",
        crate::output::plain(&home.dir().display().to_string(), false)
    ))
}

/// Opens (creating when new) the board and runs the verb.
pub fn run(home: Home, json: bool, verb: Verb) -> Result<(), Failure> {
    let reads = only_reads(&verb);
    if reads && !has_board(&home) {
        return Err(no_board(&home));
    }
    let verb = match verb {
        // Checking the config opens no board: it must report a config that stops the others.
        Verb::Config(command) => return config::run(&home, json, command),
        // The worker verbs go through a desk: the board, or the worker's report channel,
        // which a worker that cannot read the home reports through.
        verb @ (Verb::Context { .. }
        | Verb::Heartbeat { .. }
        | Verb::Complete(_)
        | Verb::Block(_)
        | Verb::RequestReview(_)
        | Verb::RequestChanges(_)
        | Verb::Approve(_)
        | Verb::Verify
        | Verb::Comment(_)) => return at_desk(Desk::new(home, json, now()), verb),
        verb => verb,
    };
    // A read opens a board it cannot write (a read-only file or directory) all the same;
    // the MCP server writes.
    let (store, Loaded { config, warnings }, created) = match reads && !matches!(verb, Verb::Mcp) {
        true => open_board_for_reading(&home)?,
        false => open_board(&home)?,
    };
    let ctx = Ctx {
        store,
        config,
        now: now(),
        json,
        paint: Paint::for_stdout(),
    };
    act(ctx, home, (created, warnings), verb)
}

/// Runs a verb on the board `run` opened; `created` says whether the open made it.
fn act(
    ctx: Ctx,
    home: Home,
    (created, warnings): (setup::Created, Vec<Warning>),
    verb: Verb,
) -> Result<(), Failure> {
    let json = ctx.json;
    match verb {
        Verb::Init => setup::init(&ctx, &home, created),
        Verb::Completions { shell } => completions(&shell),
        Verb::Man { out } => man(out.as_deref()),
        Verb::Create(a) if a.template.is_some() => tasks::create_from_template(&ctx, &home, a),
        Verb::Create(a) => tasks::create(&ctx, a),
        Verb::Swarm(a) => swarm::run(&ctx, &home, a),
        Verb::NotifySubscribe(a) => notify::subscribe(&ctx, a),
        Verb::NotifyList => notify::list(&ctx),
        Verb::NotifyUnsubscribe { id } => notify::unsubscribe(&ctx, id),
        Verb::NotifyResume { id } => notify::resume(&ctx, id),
        Verb::Edit(a) => tasks::edit(&ctx, a),
        Verb::Assign { id, profile } => tasks::assign(&ctx, id, profile),
        Verb::Reassign(a) => tasks::reassign(&ctx, a),
        Verb::Archive { ids, rm } if ids.is_empty() => tasks::delete_archived(&ctx, rm),
        Verb::Archive { ids, .. } => tasks::archive(&ctx, ids),
        Verb::List(a) => listing::list(&ctx, a),
        Verb::Show { id } => read::show(&ctx, &id),
        Verb::Runs { id } => read::runs(&ctx, &id),
        Verb::Log { id, tail } => read::log(&ctx, &home, &id, tail),
        Verb::Events(a) => listing::events(&ctx, a),
        Verb::Tail { id, interval } => listing::tail(&ctx, id, interval),
        Verb::Watch(a) => listing::watch(&ctx, a),
        Verb::Gc(a) => gc::gc(&ctx, a),
        Verb::Stats => stats::stats(&ctx),
        Verb::Assignees => profiles::assignees(&ctx),
        Verb::ImportHermes { path } => import_hermes::import_hermes(&ctx, &home, &path),
        Verb::Link { parent, child } => graph::link(&ctx, &parent, &child),
        Verb::Unlink { parent, child } => graph::unlink(&ctx, &parent, &child),
        Verb::Claim { id, lane, wait, ttl } => lanes::claim_verb(&ctx, &home, id, lane, (wait, ttl)),
        Verb::Lane(command) => lanes::run(&ctx, command),
        Verb::Unblock { ids, reason } => work::unblock(&ctx, ids, reason),
        Verb::Promote(a) => by_hand::promote(&ctx, a),
        Verb::Schedule(a) => by_hand::schedule(&ctx, a),
        Verb::Attach(a) => attachments::attach(&ctx, a),
        Verb::Attachments { id } => attachments::list(&ctx, &id),
        Verb::AttachGet { attachment, out } => attachments::get(&ctx, attachment, out.as_deref()),
        Verb::AttachRm { attachment } => attachments::remove(&ctx, attachment),
        Verb::Diagnostics(a) => diagnostics::diagnostics(&ctx, &home, &warnings, a),
        Verb::Reopen { ids, reason } => by_hand::reopen(&ctx, ids, reason),
        Verb::Reclaim { id, run, reason } => work::reclaim(&ctx, &id, run, reason),
        Verb::Decompose(a) => decompose::run(ctx, &home, a, decompose::Call::Decompose),
        Verb::Specify(a) => decompose::run(ctx, &home, a, decompose::Call::Specify),
        Verb::Dispatch {
            dry_run,
            max,
            failure_limit,
        } => gateway_verbs::dispatch(ctx, &home, dry_run, (max, failure_limit)),
        Verb::Gateway(command) => gateway_verbs::run(ctx, &home, warnings, command),
        Verb::Serve { bind, token } => serve::serve(ctx, &home, bind, token),
        Verb::Mcp => mcp::serve(ctx, home),
        Verb::Migrate { to } => migrate::migrate(&ctx, &home, &to),
        Verb::Config(command) => config::run(&home, json, command),
        Verb::Boards(command) => boards::run(&home, json, Some(home.board().as_str()), command),
        Verb::ReopenReview { id, reason } => review::reopen_review(&ctx, &id, reason),
        verb @ (Verb::Context { .. }
        | Verb::Heartbeat { .. }
        | Verb::Complete(_)
        | Verb::Block(_)
        | Verb::RequestReview(_)
        | Verb::RequestChanges(_)
        | Verb::Approve(_)
        | Verb::Verify
        | Verb::Comment(_)) => at_desk(Desk::new(home, json, ctx.now), verb),
    }
}

/// Runs a worker verb (`context`, `heartbeat`, `complete`, `block`, `comment`) at `desk`.
fn at_desk(desk: Desk, verb: Verb) -> Result<(), Failure> {
    match verb {
        Verb::Context { id } => context::context(&desk, id),
        Verb::Heartbeat { id, run, note } => work::heartbeat(&desk, id, run, note),
        Verb::Complete(a) => work::complete(&desk, a),
        Verb::Block(a) => work::block(&desk, a),
        Verb::RequestReview(a) => review::request_review(&desk, a),
        Verb::RequestChanges(a) => review::request_changes(&desk, a),
        Verb::Approve(a) => review::approve(&desk, a),
        Verb::Verify => verify::verify(&desk),
        Verb::Comment(a) => comment::comment(&desk, a),
        other => Err(Failure::Usage(format!("{other:?} is not a worker verb"))),
    }
}

/// Opens the home's board. The database is opened before the template is written, so a
/// home whose `kanban.db` is refused (not SQLite, another application's, newer) is left
/// untouched. Config warnings are left to `config check` and the gateway, so that a
/// worker's every `kanban` call does not repeat them.
pub fn open_board(home: &Home) -> Result<(Arc<dyn Store>, Loaded, setup::Created), Failure> {
    let opened = home.open()?;
    let created = setup::Created {
        home: opened.created_home,
        config: home.write_template()?,
    };
    Ok((opened.store, opened.loaded, created))
}

/// Opens the home's board to read it, writing nothing (not even the config template):
/// read only, or as a snapshot when its directory cannot be written, said once.
fn open_board_for_reading(home: &Home) -> Result<(Arc<dyn Store>, Loaded, setup::Created), Failure> {
    let (opened, snapshot) = home.open_for_reading()?;
    if snapshot {
        eprintln!(
            "kanban: warning: {} is read as a snapshot without locks (this user cannot write its \
             directory and no writer has it open): a write meanwhile is not seen",
            crate::output::plain(&home.database().display().to_string(), false)
        );
    }
    let created = setup::Created {
        home: false,
        config: false,
    };
    Ok((opened.store, opened.loaded, created))
}

/// Refuses a body, result or comment over `kanban.max_text_bytes` before the board is
/// touched: a card is read whole by every `list` and every worker's brief.
pub fn within_cap(ctx: &Ctx, what: &str, text: &str) -> Result<(), Failure> {
    text_within_cap(what, text.len(), ctx.config.kanban.max_text_bytes)
        .map_err(|e| Failure::Usage(e.to_string()))
}

/// A task id given as a free word (where a positional may be an id or text).
pub fn parse_id(text: &str) -> Result<TaskId, Failure> {
    text.parse::<TaskId>().map_err(|e| Failure::Usage(e.to_string()))
}

/// `[ID] WORDS...` of `block` and `comment`: the first word is the task when it parses
/// as a task id, and the rest are the text. Otherwise, inside a worker (whose own task is
/// meant), every word is the text; outside one, the first word had to be an id.
pub fn id_and_words(words: &[String], in_worker: bool) -> Result<(Option<TaskId>, &[String]), Failure> {
    let Some((first, rest)) = words.split_first() else {
        return Ok((None, words));
    };
    match parse_id(first) {
        Ok(id) => Ok((Some(id), rest)),
        Err(_) if in_worker => Ok((None, words)),
        Err(e) => Err(e),
    }
}

/// A profile named on the command line: `none` is nobody; a blank name is refused, the
/// same way wherever a profile is named.
pub fn profile_choice(profile: &str) -> Result<Option<String>, Failure> {
    match profile {
        board_core::shapes::NO_ASSIGNEE => Ok(None),
        blank if blank.trim().is_empty() => Err(Failure::Usage(
            "a profile name cannot be empty (use `none` for nobody)".to_owned(),
        )),
        name => Ok(Some(name.to_owned())),
    }
}

/// A verb that acts on several tasks (`archive`, `archive --rm`, `unblock`): `act` on
/// each in turn, a refusal of one not stopping the others. With `--json` one array of
/// what `shown` makes of each success; otherwise the `line` of each, as it succeeds.
pub fn each_task<T>(
    ctx: &Ctx,
    ids: Vec<TaskId>,
    mut act: impl FnMut(&TaskId) -> board_core::StoreResult<T>,
    shown: impl Fn(&TaskId, &T) -> serde_json::Value,
    line: impl Fn(&TaskId, &T) -> String,
) -> Result<(), Failure> {
    let mut done = Vec::new();
    let mut refused = Vec::new();
    for id in ids {
        match act(&id) {
            Ok(value) if ctx.json => done.push(shown(&id, &value)),
            Ok(value) => println!("{}", line(&id, &value)),
            Err(e) => refused.push(Failure::from(e)),
        }
    }
    if ctx.json {
        crate::output::print_json(&serde_json::Value::Array(done));
    }
    settle(refused)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> TaskId {
        text.parse().expect("task id")
    }

    fn worker() -> Worker {
        Worker {
            task: id("t_0000000a"),
            run: 7,
        }
    }

    #[test]
    fn a_worker_acts_on_its_own_task_guarded_by_its_run() {
        let w = worker();
        let (task, run) = target(None, None, Some(&w), "complete").expect("a target");
        assert_eq!((task, run), (id("t_0000000a"), Some(7)));
        let (task, run) = target(Some(id("t_0000000a")), None, Some(&w), "complete").expect("a target");
        assert_eq!((task, run), (id("t_0000000a"), Some(7)));
    }

    #[test]
    fn an_explicit_run_wins_over_the_workers() {
        let w = worker();
        let (_, run) = target(None, Some(3), Some(&w), "complete").expect("a target");
        assert_eq!(run, Some(3));
        let (_, run) = target(Some(id("t_0000000a")), Some(3), Some(&w), "complete").expect("a target");
        assert_eq!(run, Some(3));
    }

    #[test]
    fn another_task_is_not_guarded_by_the_workers_run() {
        let w = worker();
        let (task, run) = target(Some(id("t_0000000b")), None, Some(&w), "block").expect("a target");
        assert_eq!((task, run), (id("t_0000000b"), None));
        let (task, run) = target(Some(id("t_0000000b")), None, None, "block").expect("a target");
        assert_eq!((task, run), (id("t_0000000b"), None));
    }

    #[test]
    fn no_id_outside_a_worker_is_a_usage_error_naming_the_verb() {
        let failure = target(None, Some(3), None, "heartbeat").expect_err("no task");
        assert_eq!(failure.exit_code(), 2);
        let message = failure.message().expect("a message");
        assert!(message.starts_with("heartbeat needs a task id"), "{message}");
    }

    #[test]
    fn text_at_the_cap_passes_and_one_byte_more_is_refused() {
        assert!(text_within_cap("the body", 1024, 1024).is_ok());
        let message = text_within_cap("the body", 1025, 1024)
            .expect_err("over")
            .to_string();
        assert_eq!(
            message,
            "the body is over the 1024-byte limit (kanban.max_text_bytes); shorten it or raise the limit"
        );
    }

    #[test]
    fn a_word_that_is_not_a_task_id_is_a_usage_error() {
        assert_eq!(parse_id("t_0000000a").expect("an id"), id("t_0000000a"));
        assert_eq!(parse_id("fix the bug").expect_err("not an id").exit_code(), 2);
    }

    fn words(text: &[&str]) -> Vec<String> {
        text.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_first_word_is_the_task_only_when_it_is_a_task_id() {
        let given = words(&["t_0000000a", "waiting", "for", "keys"]);
        let (task, rest) = id_and_words(&given, false).expect("an id");
        assert_eq!((task, rest), (Some(id("t_0000000a")), &given[1..]));
        let (task, rest) = id_and_words(&given, true).expect("an id");
        assert_eq!((task, rest), (Some(id("t_0000000a")), &given[1..]));
        let given = words(&["waiting", "for", "keys"]);
        let (task, rest) = id_and_words(&given, true).expect("the worker's task");
        assert_eq!((task, rest), (None, &given[..]));
        let failure = id_and_words(&given, false).expect_err("no id outside a worker");
        let message = failure.message().expect("a message");
        assert!(message.starts_with("not a task id: \"waiting\""), "{message}");
    }

    #[test]
    fn none_is_nobody_and_a_blank_profile_is_refused() {
        assert_eq!(profile_choice("none").expect("nobody"), None);
        assert_eq!(profile_choice("coder").expect("a name"), Some("coder".to_owned()));
        for blank in ["", "  "] {
            let failure = profile_choice(blank).expect_err("blank");
            assert_eq!(failure.exit_code(), 2);
        }
    }

    #[test]
    fn settle_returns_a_single_refusal_and_reports_several() {
        assert!(settle(Vec::new()).is_ok());
        let one = settle(vec![Failure::Refused("gone".to_owned())]).expect_err("refused");
        assert_eq!(one.message(), Some("gone"));
        let several = settle(vec![
            Failure::Refused("gone".to_owned()),
            Failure::Usage("bad".to_owned()),
        ])
        .expect_err("refused");
        assert!(matches!(several, Failure::Reported));
        assert_eq!(several.exit_code(), 1);
    }
}
