//! The tools: each one's name, description and arguments (the JSON schema an agent
//! reads is derived from the argument types, so the two cannot disagree), and [`Call`],
//! one parsed call of any of them.

use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{JsonObject, Tool};
use rmcp::schemars::{self, JsonSchema};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// `list_tasks`: the board's tasks, optionally filtered.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTasks {
    /// Only tasks in this status: triage, todo, ready, running, blocked, done or archived.
    pub status: Option<String>,
    /// Only tasks assigned to this profile.
    pub assignee: Option<String>,
    /// Include archived tasks (default false).
    #[serde(default)]
    pub archived: bool,
    /// Only tasks of this tenant.
    pub tenant: Option<String>,
    /// At most this many tasks, 1 to 1000 (default 100); ask for the next page with `after`.
    pub limit: Option<u64>,
    /// Only the tasks after this task id in the list's order: the last id of the page before.
    pub after: Option<String>,
}

/// How many tasks `list_tasks` answers with when the call does not say.
pub const LIST_LIMIT: u64 = 100;
/// The most tasks one `list_tasks` call may ask for.
pub const MAX_LIST_LIMIT: u64 = 1000;

/// A tool that names one task.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRef {
    /// The task's id, e.g. t_1a2b3c4d.
    pub task_id: String,
}

/// A tool that names one task, or the worker's own task inside a worker.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnTask {
    /// The task's id, e.g. t_1a2b3c4d. Inside a worker it defaults to the worker's own task.
    pub task_id: Option<String>,
}

/// `create_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    /// A short imperative title (control characters are removed).
    pub title: String,
    /// The task's body: what to do, in Markdown.
    #[serde(default)]
    pub body: String,
    /// The profile that should run it.
    pub assignee: Option<String>,
    /// Higher runs first (default 0).
    #[serde(default)]
    pub priority: i64,
    /// Put it into triage, for the decomposer to split or tighten, instead of the queue.
    #[serde(default)]
    pub triage: bool,
    /// Ids of tasks this one waits for; it becomes ready when all of them are done.
    #[serde(default)]
    pub parents: Vec<String>,
    /// Creating twice with the same key returns the first task instead of a second one.
    pub idempotency_key: Option<String>,
    /// A worker running longer is stopped: 90, 90s, 15m, 2h.
    pub max_runtime: Option<String>,
    /// The profile that reviews the work before it counts.
    pub reviewer: Option<String>,
    /// The tenant (a namespace) the task belongs to.
    pub tenant: Option<String>,
    /// Skills the worker is asked to load, each one plain name.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Failed runs in a row that give the task up (at least 1; default: the board's limit).
    pub max_retries: Option<i64>,
}

/// `comment`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Comment {
    /// The task's id. Inside a worker it defaults to the worker's own task.
    pub task_id: Option<String>,
    /// The comment.
    pub text: String,
    /// Who writes it.
    pub author: Option<String>,
}

/// `heartbeat`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The task's id. Inside a worker it defaults to the worker's own task.
    pub task_id: Option<String>,
    /// The run the caller holds. Inside a worker it defaults to the worker's run;
    /// otherwise to the task's current run.
    pub run_id: Option<i64>,
    /// A note recorded with the heartbeat.
    pub note: Option<String>,
}

/// `complete_task`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteTask {
    /// The task's id. Inside a worker it defaults to the worker's own task.
    pub task_id: Option<String>,
    /// Only if this run is still the task's current run. Inside a worker it defaults to
    /// the worker's run. Without a run, a running task (another worker's) is refused.
    pub run_id: Option<i64>,
    /// The outcome the tasks that wait for this one will read.
    pub result: Option<String>,
    /// A short account of the run.
    pub summary: Option<String>,
    /// Any JSON value, stored with the run.
    pub metadata: Option<Value>,
    /// What backs the completion (test output, a link, a checksum), as any JSON value;
    /// a profile whose contract is `evidence` refuses a completion without it.
    pub evidence: Option<Value>,
}

/// `block_task`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockTask {
    /// The task's id. Inside a worker it defaults to the worker's own task.
    pub task_id: Option<String>,
    /// What the task needs before it can go on.
    pub reason: Option<String>,
    /// dependency, needs_input, capability or transient.
    pub kind: Option<String>,
    /// Only if this run is still the task's current run. Inside a worker it defaults to
    /// the worker's run.
    pub run_id: Option<i64>,
}

/// `request_review`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestReview {
    /// The task's id. Inside a worker it defaults to the worker's own task.
    pub task_id: Option<String>,
    /// Only if this run is still the task's current run. Inside a worker it defaults to
    /// the worker's run.
    pub run_id: Option<i64>,
    /// The profile that reviews the work (not the task's own profile).
    pub reviewer: Option<String>,
    /// What the reviewer should know about the work.
    pub summary: Option<String>,
    /// The result the tasks waiting for this one read once it is approved.
    pub result: Option<String>,
}

/// `approve`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    /// The task's id. Inside a reviewer's run it defaults to the task under review.
    pub task_id: Option<String>,
    /// Only if this run is still the task's current run. Inside a reviewer's run it
    /// defaults to that run.
    pub run_id: Option<i64>,
    /// What the review found.
    pub summary: Option<String>,
}

/// `request_changes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestChanges {
    /// The task's id. Inside a reviewer's run it defaults to the task under review.
    pub task_id: Option<String>,
    /// Only if this run is still the task's current run. Inside a reviewer's run it
    /// defaults to that run.
    pub run_id: Option<i64>,
    /// What must change: the worker reads it as `CHANGES REQUESTED: REASON`.
    pub reason: String,
}

/// `link_tasks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkTasks {
    /// The task that must be done first.
    pub parent_id: String,
    /// The task that waits for it.
    pub child_id: String,
}

/// `claim_next` (a lane's tools only).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimNext {
    /// Seconds to wait for a task to become ready; 0 (the default) answers at once.
    /// The board caps it (`lanes.max_wait_seconds`).
    #[serde(default)]
    pub wait_seconds: u32,
}

/// A lane's tool that names a task it holds.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeldTask {
    /// The task's id, as claim_next gave it.
    pub task_id: String,
    /// The run the lane holds, as claim_next gave it; by default the task's current run
    /// when it is the lane's.
    pub run_id: Option<i64>,
}

/// One call of a tool, its arguments parsed.
#[derive(Debug)]
pub enum Call {
    ClaimNext(ClaimNext),
    HeldContext(HeldTask),
    ListTasks(ListTasks),
    ShowTask(TaskRef),
    TaskContext(OwnTask),
    CreateTask(CreateTask),
    Comment(Comment),
    Heartbeat(Heartbeat),
    CompleteTask(CompleteTask),
    BlockTask(BlockTask),
    RequestReview(RequestReview),
    Approve(Approve),
    RequestChanges(RequestChanges),
    DecomposeTask(TaskRef),
    LinkTasks(LinkTasks),
}

/// A tool as listed: its name, what it does, and how its arguments parse into a [`Call`].
struct Spec {
    name: &'static str,
    description: &'static str,
    schema: fn() -> Result<std::sync::Arc<JsonObject>, String>,
    parse: fn(Value) -> Result<Call, serde_json::Error>,
}

fn parse<T: DeserializeOwned>(args: Value, call: fn(T) -> Call) -> Result<Call, serde_json::Error> {
    serde_json::from_value(args).map(call)
}

/// Which tools a server offers: the board's, or a lane's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSet {
    /// Every verb, for a worker of the gateway or a person (`kanban mcp`, `/mcp`).
    Board,
    /// A lane's: claim the next task of its profiles and report on the runs it holds
    /// (`/api/lanes/mcp`).
    Lane,
}

impl ToolSet {
    fn specs(self) -> &'static [Spec] {
        match self {
            ToolSet::Board => BOARD,
            ToolSet::Lane => LANE,
        }
    }
}

/// Every tool of the board, in the order they are listed.
const BOARD: &[Spec] = &[
    Spec {
        name: "list_tasks",
        description: "List the board's tasks (priority first, then age), optionally only those of one status or assignee. Returns a JSON array of task objects, the shape of `kanban list --json`.",
        schema: schema_for_input::<ListTasks>,
        parse: |a| parse(a, Call::ListTasks),
    },
    Spec {
        name: "show_task",
        description: "Show one task with its parents, children, runs, comments and recent events: the shape of `kanban show --json`.",
        schema: schema_for_input::<TaskRef>,
        parse: |a| parse(a, Call::ShowTask),
    },
    Spec {
        name: "task_context",
        description: "The brief to read before working on a task: its title and body, the results of the tasks it waited for, earlier attempts and recent comments, bounded in size (the shape of `kanban context --json`). Inside a worker, the worker's own task by default.",
        schema: schema_for_input::<OwnTask>,
        parse: |a| parse(a, Call::TaskContext),
    },
    Spec {
        name: "create_task",
        description: "Create a task. It is queued (ready, or todo while a parent is open), or put into triage for the decomposer with triage: true. Returns the new task object (`kanban create --json`).",
        schema: schema_for_input::<CreateTask>,
        parse: |a| parse(a, Call::CreateTask),
    },
    Spec {
        name: "comment",
        description: "Add a comment to a task, for the people and workers that read it later. Returns the comment object. Inside a worker, the worker's own task by default.",
        schema: schema_for_input::<Comment>,
        parse: |a| parse(a, Call::Comment),
    },
    Spec {
        name: "heartbeat",
        description: "Extend the lease of a running task, so the gateway knows its worker is alive; call it every few minutes during long work. Inside a worker, the worker's own task and run by default; a run that is no longer current is refused. Returns {\"task_id\", \"ok\"}.",
        schema: schema_for_input::<Heartbeat>,
        parse: |a| parse(a, Call::Heartbeat),
    },
    Spec {
        name: "complete_task",
        description: "Mark a task done, with the result the tasks waiting for it will read. Inside a worker, the worker's own task guarded by its run: a stale run is refused and nothing changes. Outside a worker a task id is needed, and a running task is refused unless its run_id is given (it is its worker's to finish). Returns {\"task_id\", \"ok\"}.",
        schema: schema_for_input::<CompleteTask>,
        parse: |a| parse(a, Call::CompleteTask),
    },
    Spec {
        name: "block_task",
        description: "Block a task that cannot go on: say why (reason) and what kind of need it is (kind: dependency, needs_input, capability or transient). Inside a worker, the worker's own task guarded by its run. Returns {\"task_id\", \"ok\"}.",
        schema: schema_for_input::<BlockTask>,
        parse: |a| parse(a, Call::BlockTask),
    },
    Spec {
        name: "request_review",
        description: "The work is done and waits for a reviewer: inside a worker, its own task, ending its run (its verifiers run first when it has some). The reviewer is the one named, else the task's, else its profile's; with none, a person reviews. Returns {\"task_id\", \"ok\"}.",
        schema: schema_for_input::<RequestReview>,
        parse: |a| parse(a, Call::RequestReview),
    },
    Spec {
        name: "approve",
        description: "Approve the work under review: the task is done and the tasks waiting for it start. Inside a reviewer's run, the task it reviews; nobody approves their own work. Returns {\"task_id\", \"ok\"}.",
        schema: schema_for_input::<Approve>,
        parse: |a| parse(a, Call::Approve),
    },
    Spec {
        name: "request_changes",
        description: "Send the work under review back to its worker with what must change (reason), which the next worker reads as a comment. Too many rounds block the task as a review loop. Inside a reviewer's run, the task it reviews. Returns {\"task_id\", \"ok\"}.",
        schema: schema_for_input::<RequestChanges>,
        parse: |a| parse(a, Call::RequestChanges),
    },
    Spec {
        name: "decompose_task",
        description: "Ask the board's model to split a triage card into tasks, or tighten it into one (the configured decomposer; it costs a model call). Returns the outcome: the new title or the ids of the child tasks.",
        schema: schema_for_input::<TaskRef>,
        parse: |a| parse(a, Call::DecomposeTask),
    },
    Spec {
        name: "link_tasks",
        description: "Make a task wait for another: the child becomes ready only when the parent is done. Cycles and self-links are refused. Returns {\"parent_id\", \"child_id\"}.",
        schema: schema_for_input::<LinkTasks>,
        parse: |a| parse(a, Call::LinkTasks),
    },
];

/// A lane's tools: it claims, reads and reports on the runs it holds, and nothing else.
const LANE: &[Spec] = &[
    Spec {
        name: "claim_next",
        description: "Claim the next ready task of this lane's profiles (highest priority first), waiting up to wait_seconds for one. Returns {\"task_id\", \"run_id\", \"lease_expires\", \"task\", \"context\"} with the brief to work from, or null when nothing was ready before the wait ended. Keep the run_id: every report names it. The lease ends unless heartbeat extends it.",
        schema: schema_for_input::<ClaimNext>,
        parse: |a| parse(a, Call::ClaimNext),
    },
    Spec {
        name: "task_context",
        description: "The brief of a task this lane holds (the shape of `kanban context --json`): its title and body, the results of the tasks it waited for, earlier attempts and recent comments.",
        schema: schema_for_input::<HeldTask>,
        parse: |a| parse(a, Call::HeldContext),
    },
    Spec {
        name: "heartbeat",
        description: "Extend the lease of a task this lane holds; call it every few minutes during long work, or the task goes to another claimer when the lease ends. Returns {\"task_id\", \"run_id\", \"ok\"}; a run that is no longer current is refused.",
        schema: schema_for_input::<Heartbeat>,
        parse: |a| parse(a, Call::Heartbeat),
    },
    Spec {
        name: "comment",
        description: "Add a comment, signed with the lane's name, to a task this lane holds. Returns the comment object.",
        schema: schema_for_input::<Comment>,
        parse: |a| parse(a, Call::Comment),
    },
    Spec {
        name: "complete_task",
        description: "Finish a task this lane holds, with the result the tasks waiting for it will read. Returns {\"task_id\", \"run_id\", \"ok\", \"status\"}: status is done, or verifying or review while checks stand between the work and done. A run that is no longer current is refused and nothing changes.",
        schema: schema_for_input::<CompleteTask>,
        parse: |a| parse(a, Call::CompleteTask),
    },
    Spec {
        name: "block_task",
        description: "Block a task this lane holds that cannot go on: say why (reason) and what kind of need it is (kind: dependency, needs_input, capability or transient). Returns {\"task_id\", \"run_id\", \"ok\", \"status\"}.",
        schema: schema_for_input::<BlockTask>,
        parse: |a| parse(a, Call::BlockTask),
    },
    Spec {
        name: "request_review",
        description: "The work on a task this lane holds is done and waits for a reviewer (the one named, else the task's, else its profile's; with none, a person). Returns {\"task_id\", \"run_id\", \"ok\", \"status\"}.",
        schema: schema_for_input::<RequestReview>,
        parse: |a| parse(a, Call::RequestReview),
    },
];

/// The tools as `tools/list` shows them.
pub fn list(set: ToolSet) -> Vec<Tool> {
    set.specs()
        .iter()
        .map(|spec| {
            // A schema that fails its own check is a bug in the types above, caught by
            // the tests that list the tools; an empty object keeps the listing usable.
            let schema = (spec.schema)().unwrap_or_default();
            Tool::new(spec.name, spec.description, schema)
        })
        .collect()
}

/// Why a call could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BadCall {
    #[error("no tool named {0:?}")]
    UnknownTool(String),
    #[error("bad arguments for {tool}: {error}")]
    Arguments { tool: &'static str, error: String },
}

/// Parses a call of the tool `name` of `set` with its arguments (absent arguments are `{}`).
pub fn parse_call(set: ToolSet, name: &str, arguments: Option<JsonObject>) -> Result<Call, BadCall> {
    let spec = set
        .specs()
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| BadCall::UnknownTool(name.to_owned()))?;
    let args = Value::Object(arguments.unwrap_or_default());
    (spec.parse)(args).map_err(|e| BadCall::Arguments {
        tool: spec.name,
        error: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_an_object_schema() {
        for spec in BOARD.iter().chain(LANE) {
            let schema = (spec.schema)().unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            assert_eq!(schema.get("type"), Some(&Value::from("object")), "{}", spec.name);
        }
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_bad_arguments() {
        let object = |v: Value| v.as_object().cloned();
        let err = parse_call(
            ToolSet::Board,
            "show_task",
            object(serde_json::json!({"id": "t_1"})),
        )
        .expect_err("unknown field");
        assert!(
            err.to_string()
                .starts_with("bad arguments for show_task: unknown field `id`"),
            "{err}"
        );
        let err = parse_call(
            ToolSet::Board,
            "create_task",
            object(serde_json::json!({"title": "x", "priority": "high"})),
        )
        .expect_err("wrong type");
        assert!(
            err.to_string()
                .starts_with("bad arguments for create_task: invalid type"),
            "{err}"
        );
        let err = parse_call(ToolSet::Board, "show_task", None).expect_err("missing field");
        assert!(err.to_string().contains("missing field `task_id`"), "{err}");
        assert!(matches!(
            parse_call(ToolSet::Board, "drop_table", None),
            Err(BadCall::UnknownTool(_))
        ));
    }

    #[test]
    fn absent_arguments_are_an_empty_object() {
        assert!(matches!(
            parse_call(ToolSet::Board, "list_tasks", None),
            Ok(Call::ListTasks(_))
        ));
        assert!(matches!(
            parse_call(ToolSet::Board, "complete_task", None),
            Ok(Call::CompleteTask(_))
        ));
    }

    #[test]
    fn a_lane_has_only_its_tools() {
        assert!(matches!(
            parse_call(ToolSet::Lane, "claim_next", None),
            Ok(Call::ClaimNext(ClaimNext { wait_seconds: 0 }))
        ));
        for other in [
            "list_tasks",
            "show_task",
            "create_task",
            "approve",
            "decompose_task",
        ] {
            assert!(
                matches!(
                    parse_call(ToolSet::Lane, other, None),
                    Err(BadCall::UnknownTool(_))
                ),
                "{other}"
            );
        }
        assert!(matches!(
            parse_call(ToolSet::Board, "claim_next", None),
            Err(BadCall::UnknownTool(_))
        ));
    }
}
