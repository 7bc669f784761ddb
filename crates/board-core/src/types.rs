//! The board's vocabulary: ids, statuses, outcomes, block kinds, tasks, runs, events.
//!
//! Every enum here maps to the exact lower-case word stored in the database and printed
//! by the CLI, through `as_str` and `FromStr`; that word is part of the public contract.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub use crate::aggregates::{DaySpend, Finished, StatusCount, Tally};
pub use crate::checks::{Checks, RunKind};

/// Unix seconds, UTC. The only notion of time in the board.
pub type Timestamp = i64;

/// A run id: an integer, unique across the board, increasing.
pub type RunId = i64;

/// A task id: `t_` followed by at least 8 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// Builds a task id from random bytes (the caller brings the randomness).
    pub fn from_random(bytes: [u8; 4]) -> TaskId {
        TaskId(format!(
            "t_{:02x}{:02x}{:02x}{:02x}",
            bytes[0], bytes[1], bytes[2], bytes[3]
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a string is not a task id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a task id: {0:?} (expected t_ and at least 8 lowercase hex digits)")]
pub struct BadTaskId(pub String);

impl FromStr for TaskId {
    type Err = BadTaskId;

    fn from_str(s: &str) -> Result<TaskId, BadTaskId> {
        let ok = s.strip_prefix("t_").is_some_and(|hex| {
            hex.len() >= 8
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok {
            Ok(TaskId(s.to_owned()))
        } else {
            Err(BadTaskId(s.chars().take(80).collect()))
        }
    }
}

/// Defines a string-backed enum with `as_str`, `FromStr`, `Display` and serde support.
macro_rules! word_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vmeta])* $variant,)+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The word stored in the database and shown to people.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word,)+ }
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                match s {
                    $($word => Ok($name::$variant),)+
                    _ => Err(UnknownWord {
                        what: $what,
                        got: s.chars().take(80).collect(),
                        expected: &[$($word,)+],
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use word_enum;

/// A word that names no value of the enum it was parsed as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {got:?} (expected one of: {})", expected.join(", "))]
pub struct UnknownWord {
    pub what: &'static str,
    pub got: String,
    pub expected: &'static [&'static str],
}

word_enum!(
    /// Where a task stands on the board.
    Status, "status" {
        Triage = "triage",
        Todo = "todo",
        Ready = "ready",
        Running = "running",
        /// A worker reported its work complete; the board's verifiers have yet to pass it.
        Verifying = "verifying",
        /// The work passed its checks and waits for a reviewer's approval.
        Review = "review",
        Blocked = "blocked",
        /// Waiting on time, not on a person (`kanban schedule`): never claimed; `unblock`
        /// releases it.
        Scheduled = "scheduled",
        Done = "done",
        Archived = "archived",
    }
);

word_enum!(
    /// The order `list` returns tasks in (`list --sort`). Ties go to the older task.
    #[derive(Default)]
    TaskOrder, "sort order" {
        /// Claim order: the highest priority first, then the oldest.
        #[default]
        Priority = "priority",
        /// The oldest first.
        Created = "created",
        /// The newest first.
        CreatedDesc = "created-desc",
        /// The lowest priority first, then the oldest.
        PriorityDesc = "priority-desc",
        /// By assignee in byte order, the unassigned first, then the oldest.
        Assignee = "assignee",
        /// The most recently changed first.
        Updated = "updated",
        /// By title, in byte order.
        Title = "title",
        /// By status in the order of a task's life (triage first, archived last), then
        /// in claim order.
        Status = "status",
    }
);

impl TaskOrder {
    /// The order's SQL sort key, as ascending columns (the stores break the ties that
    /// remain by insertion); `byte_order` is the collation that makes titles compare byte
    /// by byte (empty where that is the default, as on SQLite).
    pub fn sql_key(self, byte_order: &str) -> String {
        match self {
            TaskOrder::Priority => "-priority, created_at".to_owned(),
            TaskOrder::Created => "created_at".to_owned(),
            TaskOrder::CreatedDesc => "-created_at".to_owned(),
            TaskOrder::PriorityDesc => "priority, created_at".to_owned(),
            TaskOrder::Assignee => format!("COALESCE(assignee, ''){byte_order}, created_at"),
            TaskOrder::Updated => "-updated_at, created_at".to_owned(),
            TaskOrder::Title => format!("title{byte_order}, created_at"),
            TaskOrder::Status => {
                let ranks: String = Status::ALL
                    .iter()
                    .enumerate()
                    .map(|(rank, s)| format!(" WHEN '{}' THEN {rank}", s.as_str()))
                    .collect();
                format!("CASE status{ranks} END, -priority, created_at")
            }
        }
    }
}

/// The statuses in which a parent no longer holds its children back
/// ([`Status::releases_children`]), as a SQL list: what every store's "open parents" leave
/// out. A macro, so that SQL built with `concat!` can name it.
#[macro_export]
macro_rules! releasing_statuses_sql {
    () => {
        "'done', 'archived'"
    };
}

impl Status {
    /// A parent in this status no longer holds its children back.
    pub fn releases_children(self) -> bool {
        matches!(self, Status::Done | Status::Archived)
    }

    /// Terminal statuses: no automatic path ever leaves them.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Done | Status::Archived)
    }
}

word_enum!(
    /// How a run ended.
    Outcome, "outcome" {
        Completed = "completed",
        Blocked = "blocked",
        Crashed = "crashed",
        TimedOut = "timed_out",
        Reclaimed = "reclaimed",
        Stale = "stale",
        SpawnFailed = "spawn_failed",
        RateLimited = "rate_limited",
        ProtocolViolation = "protocol_violation",
        GaveUp = "gave_up",
        /// A verification run whose verifiers did not all pass.
        VerifyFailed = "verify_failed",
        /// A review run whose reviewer sent the work back.
        ChangesRequested = "changes_requested",
        /// A run whose task was parked in `scheduled` (`kanban schedule`).
        Scheduled = "scheduled",
    }
);

impl Outcome {
    /// Outcomes that count towards `failure_limit`.
    pub fn counts_as_failure(self) -> bool {
        matches!(
            self,
            Outcome::Crashed
                | Outcome::TimedOut
                | Outcome::Stale
                | Outcome::ProtocolViolation
                | Outcome::SpawnFailed
        )
    }
}

word_enum!(
    /// Why a worker says it cannot go on.
    BlockKind, "block kind" {
        Dependency = "dependency",
        NeedsInput = "needs_input",
        Capability = "capability",
        Transient = "transient",
    }
);

word_enum!(
    /// Where a run stands: `task_runs.status`.
    RunStatus, "run status" {
        /// Open: its worker holds the task.
        Running = "running",
        /// Closed, with an outcome.
        Ended = "ended",
    }
);

word_enum!(
    /// Why a model request was sent: `llm_calls.purpose`.
    #[derive(Default)]
    LlmPurpose, "model request purpose" {
        /// Split the card, or tighten it into a single task (`kanban decompose`).
        #[default]
        Decompose = "decompose",
        /// Rewrite the card as a single task, never split it (`kanban specify`).
        Specify = "specify",
    }
);

word_enum!(
    /// How a model request ended: `llm_calls.outcome`.
    #[derive(Default)]
    LlmOutcome, "model request outcome" {
        /// Sent and not (yet) answered: the row is written before the request goes out.
        #[default]
        Sent = "sent",
        /// A completion came back.
        Ok = "ok",
        /// The server answered with a non-2xx status.
        HttpError = "http_error",
        /// No complete answer within the timeout.
        Timeout = "timeout",
        /// The connection could not be made, or broke.
        ConnectionError = "connection_error",
        /// The body was over the decomposer's cap.
        TooLarge = "too_large",
        /// A 2xx whose body is not a chat completion.
        BadResponse = "bad_response",
        /// Never sent: its row could not be written first (a failure's word, never a row's).
        NotSent = "not_sent",
    }
);

/// One card on the board: a row of `tasks`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    pub title: String,
    pub body: String,
    pub assignee: Option<String>,
    pub status: Status,
    pub priority: i64,
    pub created_by: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub result: Option<String>,
    /// Held exactly while the task runs; stored (and serialized) as its five columns.
    #[serde(flatten, with = "lease_columns")]
    pub lease: Option<Lease>,
    pub block_kind: Option<BlockKind>,
    pub block_recurrences: i64,
    pub consecutive_failures: i64,
    pub last_failure_error: Option<String>,
    pub max_runtime_seconds: Option<i64>,
    pub idempotency_key: Option<String>,
    pub revision: i64,
    pub decompose_failures: i64,
    pub decompose_next_attempt_at: Option<Timestamp>,
    pub decompose_parked: bool,
    pub decompose_last_error: Option<String>,
    /// The profile that reviews the task's work (`request-review --reviewer`, or a
    /// profile's `reviewer:`); once set, the task's completed work goes to review.
    #[serde(default)]
    pub reviewer: Option<String>,
    /// Verification runs that failed since the task was last done.
    #[serde(default)]
    pub verify_failures: i64,
    /// Times a reviewer sent the work back since the task was last done.
    #[serde(default)]
    pub review_rounds: i64,
    /// The task's own verifiers, each an argv list, overriding its profile's `verify:`.
    #[serde(default)]
    pub verify: Option<Vec<Vec<String>>>,
    /// The namespace the task belongs to (Hermes' tenant): `list --tenant` and
    /// `watch --tenant` select by it, the decomposer's children inherit it, and its
    /// worker reads it as `KANBAN_TENANT`.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Skills its worker is asked to load (Hermes' `--skill`), in order, each a plain
    /// name ([`crate::limits::skills`]); the worker reads them as `KANBAN_SKILLS`.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Failed runs in a row that give the task up, over `kanban.failure_limit` (Hermes'
    /// `--max-retries`: 1 gives up on the first failure).
    #[serde(default)]
    pub max_retries: Option<i64>,
    /// When a `scheduled` task's time comes (`schedule --at`, `--in`; invariant 9): the
    /// gateway then puts it back to work (none: it waits for a person's `unblock`).
    #[serde(default)]
    pub scheduled_until: Option<Timestamp>,
    /// A recurring task's rule (`schedule --every`), while it waits in `scheduled` as the
    /// template of the copies the gateway makes ([`crate::recurrence`]; invariant 9).
    #[serde(default)]
    pub recurrence: Option<crate::recurrence::Recurrence>,
}

impl Task {
    /// Failed runs in a row that give this task up: its own `max_retries`, else the
    /// board's `limit` (`kanban.failure_limit`); never below 1.
    pub fn failure_limit(&self, limit: i64) -> i64 {
        self.max_retries.unwrap_or(limit).max(1)
    }

    /// The run that holds the task's lease, while it runs.
    pub fn current_run_id(&self) -> Option<RunId> {
        self.lease.as_ref().map(|l| l.run_id)
    }

    /// The pid its worker reported, while it runs.
    pub fn worker_pid(&self) -> Option<i64> {
        self.lease.as_ref().and_then(|l| l.worker_pid)
    }

    /// The host whose gateway started its worker, while it runs.
    pub fn worker_host(&self) -> Option<&str> {
        self.lease.as_ref().and_then(|l| l.worker_host.as_deref())
    }

    /// The lane that holds its run, while it runs.
    pub fn lane(&self) -> Option<&str> {
        self.lease.as_ref().and_then(|l| l.lane.as_deref())
    }
}

/// The lease of a running task: the run holding it, the token the supervisor's guards
/// compare, when it lapses, and what the worker has reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub run_id: RunId,
    pub claim_lock: String,
    pub expires: Timestamp,
    pub worker_pid: Option<i64>,
    /// The host (`gateway.host_id`) whose gateway started the worker: only that host's
    /// gateway signals, adopts or classifies it.
    pub worker_host: Option<String>,
    pub last_heartbeat_at: Option<Timestamp>,
    /// The lane (docs/lanes.md) that holds the run: an agent outside the gateway, which
    /// no gateway signals, adopts or classifies; its lease alone ends it.
    pub lane: Option<String>,
}

/// The seven `tasks` columns a lease is stored in, all null for a task that holds none.
/// The one place stored columns become a lease, for every store and for serde.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseColumns {
    pub current_run_id: Option<RunId>,
    pub claim_lock: Option<String>,
    pub claim_expires: Option<Timestamp>,
    pub worker_pid: Option<i64>,
    #[serde(default)]
    pub worker_host: Option<String>,
    pub last_heartbeat_at: Option<Timestamp>,
    #[serde(default)]
    pub lane: Option<String>,
}

/// Lease columns the board could never have written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no lease in these columns: {0}")]
pub struct BadLease(&'static str);

impl LeaseColumns {
    pub fn of(lease: Option<&Lease>) -> LeaseColumns {
        match lease {
            None => LeaseColumns::default(),
            Some(l) => LeaseColumns {
                current_run_id: Some(l.run_id),
                claim_lock: Some(l.claim_lock.clone()),
                claim_expires: Some(l.expires),
                worker_pid: l.worker_pid,
                worker_host: l.worker_host.clone(),
                last_heartbeat_at: l.last_heartbeat_at,
                lane: l.lane.clone(),
            },
        }
    }

    /// The lease these columns hold. Without a run and a claim lock there is none, and
    /// any pid, heartbeat or expiry left beside them means nothing.
    pub fn into_lease(self) -> Result<Option<Lease>, BadLease> {
        match (self.current_run_id, self.claim_lock, self.claim_expires) {
            (None, None, _) => Ok(None),
            (Some(run_id), Some(claim_lock), Some(expires)) => Ok(Some(Lease {
                run_id,
                claim_lock,
                expires,
                worker_pid: self.worker_pid,
                worker_host: self.worker_host,
                last_heartbeat_at: self.last_heartbeat_at,
                lane: self.lane,
            })),
            (Some(_), Some(_), None) => Err(BadLease("a current run without claim_expires")),
            (Some(_), None, _) | (None, Some(_), _) => Err(BadLease(
                "current_run_id and claim_lock are set one without the other",
            )),
        }
    }
}

/// `Task::lease` as its flat columns, so a serialized task has today's shape.
mod lease_columns {
    use super::{Lease, LeaseColumns};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(lease: &Option<Lease>, s: S) -> Result<S::Ok, S::Error> {
        LeaseColumns::of(lease.as_ref()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Lease>, D::Error> {
        LeaseColumns::deserialize(d)?
            .into_lease()
            .map_err(serde::de::Error::custom)
    }
}

/// One attempt at a task: a row of `task_runs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub id: RunId,
    pub task_id: TaskId,
    pub profile: Option<String>,
    pub status: RunStatus,
    pub outcome: Option<Outcome>,
    pub claim_lock: Option<String>,
    pub claim_expires: Option<Timestamp>,
    pub worker_pid: Option<i64>,
    /// The host whose gateway started its worker.
    #[serde(default)]
    pub worker_host: Option<String>,
    pub last_heartbeat_at: Option<Timestamp>,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub summary: Option<String>,
    pub error: Option<String>,
    pub metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub kind: RunKind,
    /// What the run's completion must pass (work runs; a verify or review run carries
    /// the checks of the work it checks).
    #[serde(default, skip_serializing_if = "Checks::is_none")]
    pub checks: Checks,
    /// What the run's completion was backed by: the worker's `--evidence`, or the
    /// verifiers' commands, exit codes, durations and output tails.
    #[serde(default)]
    pub evidence: Option<serde_json::Value>,
    /// The lane that held the run, when an agent outside the gateway claimed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

impl Run {
    pub fn is_open(&self) -> bool {
        self.ended_at.is_none()
    }
}

/// A row of `task_events`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub task_id: TaskId,
    pub run_id: Option<RunId>,
    pub kind: String,
    pub payload: serde_json::Value,
    pub created_at: Timestamp,
}

/// A row of `task_comments`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    pub id: i64,
    pub task_id: TaskId,
    pub author: Option<String>,
    pub body: String,
    pub created_at: Timestamp,
}

/// A row of `task_links`: `child` waits until `parent` is done or archived.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Link {
    pub parent_id: TaskId,
    pub child_id: TaskId,
}

/// One HTTP request to a model, as billed: a row of `llm_calls` but its id, which the
/// store assigns (and which only orders the rows). This is the bill. It is written
/// before the request goes out, with the outcome [`LlmOutcome::Sent`], and finished with
/// how the request ended; a row still `sent` is a request whose sender died before it
/// was answered, paid for all the same.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmCall {
    pub task_id: Option<TaskId>,
    pub purpose: LlmPurpose,
    pub model: String,
    pub started_at: Timestamp,
    pub duration_ms: i64,
    pub outcome: LlmOutcome,
    pub http_status: Option<i64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub error: Option<String>,
    /// What the call cost at the configured prices; `None` without prices.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Sent past a spend ceiling by a person (`kanban decompose --over-budget`).
    #[serde(default)]
    pub over_budget: bool,
}

/// Everything on a board at one moment: what the invariants are checked against.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardSnapshot {
    pub tasks: Vec<Task>,
    pub runs: Vec<Run>,
    pub links: Vec<Link>,
    pub events: Vec<Event>,
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_sql_list_of_releasing_statuses_is_the_core_rule() {
        let releasing: Vec<String> = Status::ALL
            .iter()
            .filter(|s| s.releases_children())
            .map(|s| format!("'{s}'"))
            .collect();
        assert_eq!(releasing_statuses_sql!(), releasing.join(", "));
    }
    use super::*;

    #[test]
    fn task_ids_parse_strictly() {
        assert!("t_0123abcd".parse::<TaskId>().is_ok());
        assert!("t_0123abcdef99".parse::<TaskId>().is_ok());
        for bad in ["t_0123abc", "t_0123ABCD", "x_0123abcd", "", "t_", "t_0123abcg"] {
            assert!(bad.parse::<TaskId>().is_err(), "{bad}");
        }
        assert_eq!(TaskId::from_random([0, 1, 0xab, 0xff]).as_str(), "t_0001abff");
    }

    #[test]
    fn a_task_serializes_its_lease_flat_and_back() {
        let mut task = crate::graph::blank_task(
            TaskId::from_random([0, 0, 0, 7]),
            "leased".into(),
            Status::Running,
            10,
        );
        task.lease = Some(Lease {
            run_id: 3,
            claim_lock: "lock-3".into(),
            expires: 99,
            worker_pid: Some(41),
            worker_host: Some("build-01".into()),
            last_heartbeat_at: None,
            lane: None,
        });
        let flat = serde_json::to_value(&task).unwrap();
        assert_eq!(flat["current_run_id"], 3);
        assert_eq!(flat["claim_lock"], "lock-3");
        assert_eq!(flat["claim_expires"], 99);
        assert_eq!(flat["worker_pid"], 41);
        assert!(flat["last_heartbeat_at"].is_null() && flat.get("lease").is_none());
        assert_eq!(serde_json::from_value::<Task>(flat).unwrap(), task);

        task.lease = None;
        let released = serde_json::to_value(&task).unwrap();
        assert!(released["current_run_id"].is_null() && released["claim_lock"].is_null());
        assert_eq!(serde_json::from_value::<Task>(released).unwrap(), task);
    }

    #[test]
    fn lease_columns_hold_a_whole_lease_or_none() {
        let stray = LeaseColumns {
            worker_pid: Some(5),
            ..LeaseColumns::default()
        };
        assert_eq!(stray.into_lease(), Ok(None));
        let half = LeaseColumns {
            current_run_id: Some(1),
            ..LeaseColumns::default()
        };
        assert!(half.into_lease().is_err());
        let unexpiring = LeaseColumns {
            current_run_id: Some(1),
            claim_lock: Some("l".into()),
            ..LeaseColumns::default()
        };
        assert!(unexpiring
            .into_lease()
            .unwrap_err()
            .to_string()
            .contains("claim_expires"));
    }

    #[test]
    fn words_round_trip() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>().unwrap(), *s);
        }
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>().unwrap(), *o);
        }
        let err = "later".parse::<Status>().unwrap_err().to_string();
        assert!(err.contains("unknown status \"later\""), "{err}");
    }
}
