//! The flags of the verbs that make or change a card (`create`, `edit`, `reassign`,
//! `complete`, `block`, `comment`), and the value lists of the board's own words.

use std::path::PathBuf;

use board_core::{BlockKind, RunId, Status, TaskId, TaskOrder};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;

use super::{parse_duration, parse_json};

/// A value parser offering every word of a board enum (so `--help` and the completion
/// scripts list them) and yielding the enum.
fn words<T>(all: &'static [T], word: fn(T) -> &'static str) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = board_core::types::UnknownWord> + Copy + Send + Sync + 'static,
{
    PossibleValuesParser::new(all.iter().map(|v| PossibleValue::new(word(*v)))).try_map(|w| w.parse::<T>())
}

/// The statuses, as a value list.
pub fn statuses() -> impl TypedValueParser<Value = Status> {
    words(Status::ALL, Status::as_str)
}

/// The orders of `list --sort`, as a value list.
pub fn orders() -> impl TypedValueParser<Value = TaskOrder> {
    words(TaskOrder::ALL, TaskOrder::as_str)
}

/// The block kinds, as a value list.
pub fn block_kinds() -> impl TypedValueParser<Value = BlockKind> {
    words(BlockKind::ALL, BlockKind::as_str)
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// What the task is, in one line
    pub title: String,
    /// The task's body
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the body from a file, or from stdin with `-`
    #[arg(long, value_name = "PATH|-")]
    pub body_file: Option<PathBuf>,
    /// The profile to run it, or `none` for nobody [default: kanban.default_assignee]
    #[arg(long, value_name = "PROFILE|none")]
    pub assignee: Option<String>,
    /// Who asks for it [default: $KANBAN_PROFILE inside a worker, else $USER, $LOGNAME or
    /// the uid]
    #[arg(long, value_name = "NAME")]
    pub created_by: Option<String>,
    /// A task this one waits for (repeatable)
    #[arg(long = "parent", value_name = "ID")]
    pub parents: Vec<TaskId>,
    /// Higher runs first
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
    /// Put it in triage for the decomposer
    #[arg(long)]
    pub triage: bool,
    /// Creating twice with the same key returns the first task (and says `exists`)
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// A worker running longer is stopped: 90, 90s, 15m, 2h
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub max_runtime: Option<i64>,
    /// The profile that reviews the work before it counts
    #[arg(long, value_name = "PROFILE")]
    pub reviewer: Option<String>,
    /// A verifier the gateway runs on the reported work, as a JSON argv list, e.g.
    /// '["cargo", "test"]' (repeatable; replaces the profile's `verify:`)
    #[arg(long = "verify", value_name = "JSON", value_parser = parse_argv)]
    pub verify: Vec<Vec<String>>,
    /// Run no verifiers on this task's work, whatever its profile names
    #[arg(long, conflicts_with = "verify")]
    pub no_verify: bool,
    /// The tenant (a namespace): `list --tenant` and `watch --tenant` select by it, the
    /// decomposer's children inherit it, the worker reads KANBAN_TENANT
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// A skill the worker is asked to load (repeatable), e.g. --skill translation
    /// --skill github-code-review; the worker reads them as KANBAN_SKILLS, comma-joined
    #[arg(long = "skill", value_name = "NAME")]
    pub skills: Vec<String>,
    /// Failed runs in a row that give this task up (1: the first failure)
    /// [default: kanban.failure_limit]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub max_retries: Option<i64>,
    /// Hermes' start: `running` (the default: ready, or todo while a parent is open) or
    /// `blocked` (waits for a person's unblock)
    #[arg(long, value_name = "STATUS", value_parser = ["running", "blocked"], conflicts_with = "triage")]
    pub initial_status: Option<String>,
    /// Hermes' workspace: only `scratch` here (every worker runs in the home's
    /// workspaces/ID); `worktree` and `dir:PATH` are refused
    #[arg(long, value_name = "KIND")]
    pub workspace: Option<String>,
    /// Hermes' worktree branch: refused here (there are no worktree workspaces)
    #[arg(long, value_name = "NAME", hide = true)]
    pub branch: Option<String>,
    /// Hermes' goal loop: refused here (a loop is the worker command's own)
    #[arg(long, hide = true)]
    pub goal: bool,
    /// Make it from a team template of the home's templates/: TITLE is the goal, the
    /// template's steps its children, and the task itself is done last by the template's
    /// root profile
    #[arg(long, value_name = "NAME", conflicts_with_all = ["triage", "parents", "idempotency_key", "initial_status", "body", "body_file", "assignee"])]
    pub template: Option<String>,
    /// With --template: the cards each repeated step makes [default: the template's, else 3]
    #[arg(long, value_name = "N", requires = "template", value_parser = clap::value_parser!(u8).range(1..=32))]
    pub workers: Option<u8>,
}

/// A verifier as a JSON argv list: `["cargo", "test", "--quiet"]`.
pub fn parse_argv(text: &str) -> Result<Vec<String>, String> {
    let argv: Vec<String> = serde_json::from_str(text)
        .map_err(|e| format!("a verifier is a JSON list of strings, e.g. '[\"cargo\", \"test\"]' ({e})"))?;
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err("a verifier's list starts with the program to run".into());
    }
    Ok(argv)
}

#[derive(Debug, Args)]
pub struct EditArgs {
    /// The task
    #[arg(value_name = "ID")]
    pub id: TaskId,
    /// The new title
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// The new body
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,
    /// The new priority (higher runs first)
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// A done task's result, filled in after the fact (what its children read)
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["title", "body", "priority"])]
    pub result: Option<String>,
    /// With --result: the summary kept on its completed run [default: the result]
    #[arg(long, value_name = "TEXT", requires = "result")]
    pub summary: Option<String>,
    /// With --result: a JSON value kept on its completed run
    #[arg(long, value_name = "JSON", value_parser = parse_json, requires = "result")]
    pub metadata: Option<serde_json::Value>,
}

#[derive(Debug, Args)]
pub struct ReassignArgs {
    /// The task
    #[arg(value_name = "ID")]
    pub id: TaskId,
    /// A profile name, or `none` to clear the assignee
    #[arg(value_name = "PROFILE|none")]
    pub profile: String,
    /// When the task runs, stop its worker and return it to ready first
    #[arg(long)]
    pub reclaim: bool,
    /// Why, recorded with the reclaim [default: reassigned to PROFILE]
    #[arg(long, value_name = "TEXT", requires = "reclaim")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// The tasks [default: $KANBAN_TASK]
    #[arg(value_name = "ID")]
    pub ids: Vec<TaskId>,
    /// Only if RUN is still the current run [default: $KANBAN_RUN_ID in a worker]
    #[arg(long, value_name = "RUN")]
    pub run: Option<RunId>,
    /// Land a journaled completion of run RUN that already ended
    #[arg(long, value_name = "RUN", conflicts_with = "run")]
    pub replay_run: Option<RunId>,
    /// What the children's workers will read
    #[arg(long, value_name = "TEXT")]
    pub result: Option<String>,
    /// A short account of the run
    #[arg(long, value_name = "TEXT")]
    pub summary: Option<String>,
    /// A JSON value stored with the run
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    pub metadata: Option<serde_json::Value>,
    /// What backs the completion, as JSON (test output, a link, a checksum); a profile
    /// whose contract is `evidence` refuses a completion without it
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    pub evidence: Option<serde_json::Value>,
}

#[derive(Debug, Args)]
pub struct RequestReviewArgs {
    /// The task [default: $KANBAN_TASK]
    #[arg(value_name = "ID")]
    pub id: Option<TaskId>,
    /// Only if RUN is still the current run [default: $KANBAN_RUN_ID in a worker]
    #[arg(long, value_name = "RUN")]
    pub run: Option<RunId>,
    /// The profile that reviews it [default: the task's, else its profile's reviewer]
    #[arg(long, value_name = "PROFILE")]
    pub reviewer: Option<String>,
    /// What the reviewer should know about the work
    #[arg(long, value_name = "TEXT")]
    pub summary: Option<String>,
    /// The result the children read once the work is approved
    #[arg(long, value_name = "TEXT")]
    pub result: Option<String>,
}

#[derive(Debug, Args)]
pub struct RequestChangesArgs {
    /// `[ID] REASON...`: the first word is the task when it is a task id; the other
    /// words, joined by spaces, are the reason. Inside a reviewer's run, when the first
    /// word is not a task id, every word is the reason and the task is the one reviewed
    #[arg(value_name = "ID|REASON", required = true)]
    pub words: Vec<String>,
    /// Only if RUN is still the current run [default: $KANBAN_RUN_ID in a reviewer]
    #[arg(long, value_name = "RUN")]
    pub run: Option<RunId>,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The task [default: $KANBAN_TASK]
    #[arg(value_name = "ID")]
    pub id: Option<TaskId>,
    /// Only if RUN is still the current run [default: $KANBAN_RUN_ID in a reviewer]
    #[arg(long, value_name = "RUN")]
    pub run: Option<RunId>,
    /// What the reviewer found
    #[arg(long, value_name = "TEXT")]
    pub summary: Option<String>,
}

#[derive(Debug, Args)]
pub struct BlockArgs {
    /// `[ID] [REASON...]`: the first word is the task when it is a task id; the other
    /// words, joined by spaces, are the reason. Inside a worker, when the first word is
    /// not a task id, every word is the reason and the task is the worker's own
    #[arg(value_name = "ID|REASON")]
    pub words: Vec<String>,
    /// What the task waits for: `dependency` waits in todo while a parent is open (and
    /// is promoted when the parents finish); `needs_input` and `capability` wait in
    /// blocked for a person; `transient` marks a failure that may pass. Blocked again
    /// with the same kind after an unblock, often enough, a task goes to triage
    #[arg(long, value_name = "KIND", value_parser = block_kinds())]
    pub kind: Option<BlockKind>,
    /// Only if RUN is still the current run [default: $KANBAN_RUN_ID in a worker]
    #[arg(long, value_name = "RUN")]
    pub run: Option<RunId>,
    /// More tasks to block with the same reason (bulk; the run guard applies to the
    /// first task only)
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub ids: Vec<TaskId>,
}

/// The tasks a verb by hand acts on, and why: `ID [REASON...] [--ids ID...]`.
#[derive(Debug, Args)]
pub struct Targets {
    /// The task
    #[arg(value_name = "ID")]
    pub id: TaskId,
    /// Why, recorded in the task's event
    #[arg(value_name = "REASON")]
    pub reason: Vec<String>,
    /// More tasks, with the same reason
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub ids: Vec<TaskId>,
}

impl Targets {
    /// The reason, when one was given.
    pub fn reason(&self) -> Option<String> {
        Some(self.reason.join(" ")).filter(|r| !r.trim().is_empty())
    }
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// Wait until this time, then the gateway puts the task back to work:
    /// 2026-12-24T08:00:00Z or "2026-12-24 08:00" (local time)
    #[arg(long, value_name = "TIME", value_parser = super::reads::parse_moment, conflicts_with = "within")]
    pub at: Option<i64>,
    /// Wait this long, then the gateway puts the task back to work: 90s, 15m, 2h, 1d
    #[arg(long = "in", value_name = "DUR", value_parser = parse_duration)]
    pub within: Option<i64>,
    /// Repeat: the task waits as a template and the gateway makes a fresh copy of it each
    /// time, every DUR (2h, 1d; from its first time) or at each match of a five-field cron
    /// expression ("0 9 * * 1-5"); its first time is --at/--in, else the rule's next
    #[arg(long, value_name = "DUR|CRON")]
    pub every: Option<String>,
    /// The IANA time zone a cron expression is read in [default: this machine's, else UTC]
    #[arg(long, value_name = "ZONE", requires = "every")]
    pub tz: Option<String>,
    /// Only if RUN is still the first task's current run
    #[arg(long, value_name = "RUN")]
    pub run: Option<RunId>,
}

#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// Promote even while a parent is not done or archived: the task stops waiting for
    /// those parents (its links to them are removed, each an `unlinked` event)
    #[arg(long)]
    pub force: bool,
    /// Say whether each promotion would succeed, and change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct SwarmArgs {
    /// The template: templates/TEMPLATE.yaml of the home
    #[arg(value_name = "TEMPLATE")]
    pub template: String,
    /// What the swarm is for: the text every `{goal}` of the template becomes
    #[arg(long, value_name = "TEXT")]
    pub goal: String,
    /// The cards each repeated step makes [default: the template's, else 3]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=32))]
    pub workers: Option<u8>,
    /// The tenant of the goal's card
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// Higher runs first
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
}

#[derive(Debug, Args)]
pub struct NotifySubscribeArgs {
    /// The task whose events it hears
    #[arg(value_name = "ID", required_unless_present = "all")]
    pub id: Option<TaskId>,
    /// Every task's events, on the whole board
    #[arg(long, conflicts_with = "id")]
    pub all: bool,
    /// The event kinds it hears, comma-separated [default: completed, blocked,
    /// review_requested, gave_up]
    #[arg(long, value_name = "KINDS", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// The URL the gateway posts to: http:// or https://, no credentials in it
    #[arg(long, value_name = "URL")]
    pub webhook: String,
    /// The signing key (at least 16 bytes) [default: 32 random bytes, printed once]
    #[arg(long, value_name = "SECRET")]
    pub secret: Option<String>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The task
    #[arg(value_name = "ID")]
    pub id: TaskId,
    /// The file to attach: a regular file, not a link
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Its name on the card [default: the file's name]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Its type, e.g. text/plain [default: guessed from the name]
    #[arg(long, value_name = "TYPE")]
    pub content_type: Option<String>,
    /// Who attaches it [default: $KANBAN_PROFILE inside a worker, else $USER]
    #[arg(long, value_name = "NAME")]
    pub author: Option<String>,
}

#[derive(Debug, Args)]
pub struct CommentArgs {
    /// `[ID] TEXT...`: the first word is the task when it is a task id and more words
    /// follow; the other words, joined by spaces, are the text. Inside a worker, when the
    /// first word is not a task id (or is the only word), every word is the text and the
    /// task is the worker's own
    #[arg(value_name = "ID|TEXT", required = true)]
    pub words: Vec<String>,
    /// Who says it [default: $KANBAN_PROFILE inside a worker, else $USER, $LOGNAME or the
    /// uid]
    #[arg(long, value_name = "NAME")]
    pub author: Option<String>,
}
