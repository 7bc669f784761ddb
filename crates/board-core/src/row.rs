//! How each table's rows are stored: its columns, in order, named once for every SQL
//! store.
//!
//! A row is a list of [`Cell`]s in the order of its type's [`Stored::COLUMNS`]. A store
//! builds its statements from the column names, binds [`Stored::cells`] as the
//! parameters, and reads a row back by handing its values, in the same order, to
//! [`Stored::from_cells`]. What differs between SQLite and PostgreSQL is only how a
//! cell becomes a driver's parameter or value.

use std::borrow::Cow;
use std::str::FromStr;

use crate::recurrence::Recurrence;
use crate::types::{Checks, LlmOutcome, LlmPurpose, RunKind, RunStatus};
use crate::{BlockKind, Comment, Event, LeaseColumns, LlmCall, Outcome, Run, RunId, Status, Task, TaskId};

/// The SQL type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    Real,
    Bool,
}

/// One stored value: a parameter borrowing its row, or a value read back.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell<'a> {
    Null,
    Text(Cow<'a, str>),
    Int(i64),
    Real(f64),
    Bool(bool),
}

impl Cell<'_> {
    /// The same value, owning its text.
    pub fn into_owned(self) -> Cell<'static> {
        match self {
            Cell::Null => Cell::Null,
            Cell::Text(text) => Cell::Text(Cow::Owned(text.into_owned())),
            Cell::Int(n) => Cell::Int(n),
            Cell::Real(x) => Cell::Real(x),
            Cell::Bool(b) => Cell::Bool(b),
        }
    }
}

/// A row that cannot be the type it is stored as: a word the core does not know,
/// broken JSON, a value of the wrong type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("reading {column}: {message}")]
pub struct BadRow {
    pub column: &'static str,
    pub message: String,
}

/// A type stored as one row of a table.
pub trait Stored: Sized {
    /// Its columns and their types, in the order of `cells` and `from_cells`.
    const COLUMNS: &'static [(&'static str, Kind)];

    /// Its values for `COLUMNS`, in their order.
    fn cells(&self) -> Vec<Cell<'_>>;

    /// The value a row holds, given its cells in the order of `COLUMNS`.
    fn from_cells(cells: Vec<Cell<'_>>) -> Result<Self, BadRow>;
}

/// The column names of `T`, comma-separated, as a statement's text shows them
/// (`format!("SELECT {TASK_COLUMNS} FROM tasks")`).
pub struct Columns<T>(std::marker::PhantomData<fn() -> T>);

impl<T> Columns<T> {
    pub const fn new() -> Self {
        Columns(std::marker::PhantomData)
    }
}

impl<T> Default for Columns<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Stored> std::fmt::Display for Columns<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, _)) in T::COLUMNS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// A field's type as a column.
pub trait Field: Sized {
    const KIND: Kind;
    fn cell(&self) -> Cell<'_>;
    fn read(cell: Cell<'_>) -> Result<Self, String>;
}

fn wrong(cell: &Cell<'_>, wanted: &str) -> String {
    format!("expected {wanted}, found {cell:?}")
}

impl<T: Field> Field for Option<T> {
    const KIND: Kind = T::KIND;

    fn cell(&self) -> Cell<'_> {
        self.as_ref().map_or(Cell::Null, T::cell)
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        match cell {
            Cell::Null => Ok(None),
            cell => T::read(cell).map(Some),
        }
    }
}

impl Field for String {
    const KIND: Kind = Kind::Text;

    fn cell(&self) -> Cell<'_> {
        Cell::Text(Cow::Borrowed(self))
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        match cell {
            Cell::Text(text) => Ok(text.into_owned()),
            other => Err(wrong(&other, "text")),
        }
    }
}

impl Field for i64 {
    const KIND: Kind = Kind::Int;

    fn cell(&self) -> Cell<'_> {
        Cell::Int(*self)
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        match cell {
            Cell::Int(n) => Ok(n),
            other => Err(wrong(&other, "an integer")),
        }
    }
}

impl Field for f64 {
    const KIND: Kind = Kind::Real;

    fn cell(&self) -> Cell<'_> {
        Cell::Real(*self)
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        match cell {
            Cell::Real(x) => Ok(x),
            // SQLite hands back a whole REAL as an integer.
            Cell::Int(n) => Ok(n as f64),
            other => Err(wrong(&other, "a number")),
        }
    }
}

impl Field for bool {
    const KIND: Kind = Kind::Bool;

    fn cell(&self) -> Cell<'_> {
        Cell::Bool(*self)
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        match cell {
            Cell::Bool(b) => Ok(b),
            // SQLite stores a boolean as 0 or 1.
            Cell::Int(n @ (0 | 1)) => Ok(n == 1),
            other => Err(wrong(&other, "a boolean")),
        }
    }
}

/// A text cell's text, borrowed: a word or JSON is read from it without a copy.
fn text<'c>(cell: &'c Cell<'_>) -> Result<&'c str, String> {
    match cell {
        Cell::Text(text) => Ok(text),
        other => Err(wrong(other, "text")),
    }
}

/// JSON, kept as its text so a payload reads back byte for byte.
impl Field for serde_json::Value {
    const KIND: Kind = Kind::Text;

    fn cell(&self) -> Cell<'_> {
        Cell::Text(Cow::Owned(self.to_string()))
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        serde_json::from_str(text(&cell)?).map_err(|e| e.to_string())
    }
}

/// The core's words (an id, a status, an outcome, a block kind), stored as text.
macro_rules! word_fields {
    ($($word:ty),*) => {$(
        impl Field for $word {
            const KIND: Kind = Kind::Text;

            fn cell(&self) -> Cell<'_> {
                Cell::Text(Cow::Borrowed(self.as_str()))
            }

            fn read(cell: Cell<'_>) -> Result<Self, String> {
                <$word as FromStr>::from_str(text(&cell)?).map_err(|e| e.to_string())
            }
        }
    )*};
}

word_fields!(TaskId, Status, BlockKind, Outcome, RunStatus, RunKind, LlmPurpose, LlmOutcome);

/// A run's checks, as JSON; none at all is stored as null.
impl Field for Checks {
    const KIND: Kind = Kind::Text;

    fn cell(&self) -> Cell<'_> {
        if self.is_none() {
            Cell::Null
        } else {
            Cell::Text(Cow::Owned(serde_json::json!(self).to_string()))
        }
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        match cell {
            Cell::Null => Ok(Checks::default()),
            cell => serde_json::from_str(text(&cell)?).map_err(|e| e.to_string()),
        }
    }
}

/// A value stored as its JSON text: a task's verifiers (a JSON array of argv arrays) and
/// its skills (a JSON array of names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonText<T>(pub T);

impl<T: serde::Serialize + serde::de::DeserializeOwned> Field for JsonText<T> {
    const KIND: Kind = Kind::Text;

    fn cell(&self) -> Cell<'_> {
        // A list of strings always serializes.
        Cell::Text(Cow::Owned(serde_json::to_string(&self.0).unwrap_or_default()))
    }

    fn read(cell: Cell<'_>) -> Result<Self, String> {
        serde_json::from_str(text(&cell)?)
            .map(JsonText)
            .map_err(|e| e.to_string())
    }
}

/// Takes the next cell as the column it is stored in.
fn take<'a, T: Field>(cells: &mut impl Iterator<Item = Cell<'a>>, column: &'static str) -> Result<T, BadRow> {
    let cell = cells.next().ok_or_else(|| BadRow {
        column,
        message: "missing".to_owned(),
    })?;
    T::read(cell).map_err(|message| BadRow { column, message })
}

/// Declares a flat type's row: its fields, each one column of the same name, in order.
/// With `struct`, it declares the type too.
macro_rules! stored {
    ($(#[$meta:meta])* struct $ty:ident { $($field:ident: $fty:ty),* $(,)? }) => {
        $(#[$meta])*
        struct $ty { $($field: $fty),* }
        stored!($ty { $($field: $fty),* });
    };
    ($ty:ident { $($field:ident: $fty:ty),* $(,)? }) => {
        impl Stored for $ty {
            const COLUMNS: &'static [(&'static str, Kind)] =
                &[$((stringify!($field), <$fty as Field>::KIND)),*];

            fn cells(&self) -> Vec<Cell<'_>> {
                vec![$(<$fty as Field>::cell(&self.$field)),*]
            }

            fn from_cells(cells: Vec<Cell<'_>>) -> Result<Self, BadRow> {
                let mut cells = cells.into_iter();
                Ok($ty { $($field: take::<$fty>(&mut cells, stringify!($field))?),* })
            }
        }
    };
}

stored!(Run {
    id: RunId,
    task_id: TaskId,
    profile: Option<String>,
    status: RunStatus,
    outcome: Option<Outcome>,
    claim_lock: Option<String>,
    claim_expires: Option<i64>,
    worker_pid: Option<i64>,
    worker_host: Option<String>,
    last_heartbeat_at: Option<i64>,
    started_at: i64,
    ended_at: Option<i64>,
    summary: Option<String>,
    error: Option<String>,
    metadata: Option<serde_json::Value>,
    kind: RunKind,
    checks: Checks,
    evidence: Option<serde_json::Value>,
    lane: Option<String>,
});

stored!(Event {
    id: i64,
    task_id: TaskId,
    run_id: Option<RunId>,
    kind: String,
    payload: serde_json::Value,
    created_at: i64,
});

stored!(Comment {
    id: i64,
    task_id: TaskId,
    author: Option<String>,
    body: String,
    created_at: i64,
});

stored!(LlmCall {
    task_id: Option<TaskId>,
    purpose: LlmPurpose,
    model: String,
    started_at: i64,
    duration_ms: i64,
    outcome: LlmOutcome,
    http_status: Option<i64>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    error: Option<String>,
    cost: Option<f64>,
    over_budget: bool,
});

stored!(
    /// `tasks` holds a `Task` with its lease as the seven columns of `LeaseColumns`.
    struct TaskRow {
        id: TaskId,
        title: String,
        body: String,
        assignee: Option<String>,
        status: Status,
        priority: i64,
        created_by: Option<String>,
        created_at: i64,
        updated_at: i64,
        started_at: Option<i64>,
        completed_at: Option<i64>,
        result: Option<String>,
        current_run_id: Option<RunId>,
        claim_lock: Option<String>,
        claim_expires: Option<i64>,
        worker_pid: Option<i64>,
        worker_host: Option<String>,
        last_heartbeat_at: Option<i64>,
        block_kind: Option<BlockKind>,
        block_recurrences: i64,
        consecutive_failures: i64,
        last_failure_error: Option<String>,
        max_runtime_seconds: Option<i64>,
        idempotency_key: Option<String>,
        revision: i64,
        decompose_failures: i64,
        decompose_next_attempt_at: Option<i64>,
        decompose_parked: bool,
        decompose_last_error: Option<String>,
        reviewer: Option<String>,
        verify_failures: i64,
        review_rounds: i64,
        verify: Option<JsonText<Vec<Vec<String>>>>,
        lane: Option<String>,
        tenant: Option<String>,
        skills: Option<JsonText<Vec<String>>>,
        max_retries: Option<i64>,
        scheduled_until: Option<i64>,
        recurrence: Option<JsonText<Recurrence>>,
    }
);

impl Stored for Task {
    const COLUMNS: &'static [(&'static str, Kind)] = TaskRow::COLUMNS;

    fn cells(&self) -> Vec<Cell<'_>> {
        let t = self.clone();
        let lease = LeaseColumns::of(t.lease.as_ref());
        let row = TaskRow {
            id: t.id,
            title: t.title,
            body: t.body,
            assignee: t.assignee,
            status: t.status,
            priority: t.priority,
            created_by: t.created_by,
            created_at: t.created_at,
            updated_at: t.updated_at,
            started_at: t.started_at,
            completed_at: t.completed_at,
            result: t.result,
            current_run_id: lease.current_run_id,
            claim_lock: lease.claim_lock,
            claim_expires: lease.claim_expires,
            worker_pid: lease.worker_pid,
            worker_host: lease.worker_host,
            last_heartbeat_at: lease.last_heartbeat_at,
            block_kind: t.block_kind,
            block_recurrences: t.block_recurrences,
            consecutive_failures: t.consecutive_failures,
            last_failure_error: t.last_failure_error,
            max_runtime_seconds: t.max_runtime_seconds,
            idempotency_key: t.idempotency_key,
            revision: t.revision,
            decompose_failures: t.decompose_failures,
            decompose_next_attempt_at: t.decompose_next_attempt_at,
            decompose_parked: t.decompose_parked,
            decompose_last_error: t.decompose_last_error,
            reviewer: t.reviewer,
            verify_failures: t.verify_failures,
            review_rounds: t.review_rounds,
            verify: t.verify.map(JsonText),
            lane: lease.lane,
            tenant: t.tenant,
            skills: (!t.skills.is_empty()).then_some(JsonText(t.skills)),
            max_retries: t.max_retries,
            scheduled_until: t.scheduled_until,
            recurrence: t.recurrence.map(JsonText),
        };
        row.cells().into_iter().map(Cell::into_owned).collect()
    }

    fn from_cells(cells: Vec<Cell<'_>>) -> Result<Self, BadRow> {
        let r = TaskRow::from_cells(cells)?;
        let lease = LeaseColumns {
            current_run_id: r.current_run_id,
            claim_lock: r.claim_lock,
            claim_expires: r.claim_expires,
            worker_pid: r.worker_pid,
            worker_host: r.worker_host,
            last_heartbeat_at: r.last_heartbeat_at,
            lane: r.lane,
        }
        .into_lease()
        .map_err(|e| BadRow {
            column: "current_run_id",
            message: e.to_string(),
        })?;
        Ok(Task {
            id: r.id,
            title: r.title,
            body: r.body,
            assignee: r.assignee,
            status: r.status,
            priority: r.priority,
            created_by: r.created_by,
            created_at: r.created_at,
            updated_at: r.updated_at,
            started_at: r.started_at,
            completed_at: r.completed_at,
            result: r.result,
            lease,
            block_kind: r.block_kind,
            block_recurrences: r.block_recurrences,
            consecutive_failures: r.consecutive_failures,
            last_failure_error: r.last_failure_error,
            max_runtime_seconds: r.max_runtime_seconds,
            idempotency_key: r.idempotency_key,
            revision: r.revision,
            decompose_failures: r.decompose_failures,
            decompose_next_attempt_at: r.decompose_next_attempt_at,
            decompose_parked: r.decompose_parked,
            decompose_last_error: r.decompose_last_error,
            reviewer: r.reviewer,
            verify_failures: r.verify_failures,
            review_rounds: r.review_rounds,
            verify: r.verify.map(|s| s.0),
            tenant: r.tenant,
            skills: r.skills.map(|n| n.0).unwrap_or_default(),
            max_retries: r.max_retries,
            scheduled_until: r.scheduled_until,
            recurrence: r.recurrence.map(|n| n.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recurrence::Every;
    use crate::Lease;

    fn task() -> Task {
        Task {
            id: "t_0000000a".parse().unwrap(),
            title: "title".into(),
            body: "body".into(),
            assignee: Some("ann".into()),
            status: Status::Running,
            priority: 3,
            created_by: Some("bob".into()),
            created_at: 10,
            updated_at: 11,
            started_at: Some(12),
            completed_at: None,
            result: Some("result".into()),
            lease: Some(Lease {
                run_id: 7,
                claim_lock: "lock".into(),
                expires: 13,
                worker_pid: Some(14),
                worker_host: Some("host".into()),
                last_heartbeat_at: Some(15),
                lane: None,
            }),
            block_kind: Some(BlockKind::Dependency),
            block_recurrences: 16,
            consecutive_failures: 17,
            last_failure_error: Some("error".into()),
            max_runtime_seconds: Some(18),
            idempotency_key: Some("key".into()),
            revision: 19,
            decompose_failures: 20,
            decompose_next_attempt_at: Some(21),
            decompose_parked: true,
            decompose_last_error: Some("last".into()),
            reviewer: Some("rev".into()),
            verify_failures: 22,
            review_rounds: 23,
            verify: Some(vec![vec!["make".into(), "test".into()]]),
            tenant: Some("acme".into()),
            skills: vec!["translation".into(), "review".into()],
            max_retries: Some(24),
            scheduled_until: Some(25),
            recurrence: Some(Recurrence::new(Every::Seconds(60)).unwrap()),
        }
    }

    #[test]
    fn a_task_reads_back_from_its_cells() {
        let t = task();
        let cells: Vec<Cell<'static>> = t.cells().into_iter().map(Cell::into_owned).collect();
        assert_eq!(cells.len(), Task::COLUMNS.len());
        assert_eq!(Task::from_cells(cells).unwrap(), t);
    }

    #[test]
    fn each_column_holds_the_field_of_its_name() {
        let t = task();
        let cells = t.cells();
        let at = |name: &str| &cells[Task::COLUMNS.iter().position(|(c, _)| *c == name).unwrap()];
        assert_eq!(at("status"), &Cell::Text("running".into()));
        assert_eq!(at("assignee"), &Cell::Text("ann".into()));
        assert_eq!(at("claim_expires"), &Cell::Int(13));
        assert_eq!(at("worker_host"), &Cell::Text("host".into()));
        assert_eq!(at("decompose_parked"), &Cell::Bool(true));
        assert_eq!(at("revision"), &Cell::Int(19));
        assert_eq!(at("tenant"), &Cell::Text("acme".into()));
        assert_eq!(at("skills"), &Cell::Text(r#"["translation","review"]"#.into()));
        assert_eq!(at("max_retries"), &Cell::Int(24));
        assert_eq!(at("scheduled_until"), &Cell::Int(25));
        assert_eq!(
            at("recurrence"),
            &Cell::Text(r#"{"every":{"seconds":60},"last_copy":null,"copies":0}"#.into())
        );
        let none = Task {
            skills: Vec::new(),
            ..t.clone()
        };
        let cells = none.cells();
        let skills = Task::COLUMNS.iter().position(|(c, _)| *c == "skills").unwrap();
        assert_eq!(cells[skills], Cell::Null);
    }

    #[test]
    fn a_bad_row_names_its_column() {
        let mut cells: Vec<Cell<'static>> = task().cells().into_iter().map(Cell::into_owned).collect();
        let status = Task::COLUMNS.iter().position(|(c, _)| *c == "status").unwrap();
        cells[status] = Cell::Text("sleeping".into());
        let err = Task::from_cells(cells).unwrap_err();
        assert_eq!(err.column, "status");
        let short = Comment::from_cells(vec![Cell::Int(1)]).unwrap_err();
        assert_eq!((short.column, short.message.as_str()), ("task_id", "missing"));
    }

    #[test]
    fn a_run_keeps_its_kind_checks_and_evidence_and_no_checks_is_null() {
        let mut run = Run {
            id: 4,
            task_id: "t_0000000a".parse().unwrap(),
            profile: Some("coder".into()),
            status: RunStatus::Ended,
            outcome: Some(Outcome::Completed),
            claim_lock: None,
            claim_expires: None,
            worker_pid: None,
            worker_host: None,
            last_heartbeat_at: None,
            started_at: 1,
            ended_at: Some(2),
            summary: None,
            error: None,
            metadata: None,
            kind: RunKind::Verify,
            checks: Checks {
                verify: true,
                review: true,
                reviewer: Some("critic".into()),
                evidence: false,
            },
            evidence: Some(serde_json::json!([{ "exit_code": 0 }])),
            lane: None,
        };
        let at = |run: &Run, name: &str| {
            let column = Run::COLUMNS.iter().position(|(c, _)| *c == name).unwrap();
            run.cells()[column].clone().into_owned()
        };
        assert_eq!(at(&run, "kind"), Cell::Text("verify".into()));
        assert_eq!(
            at(&run, "checks"),
            Cell::Text(r#"{"verify":true,"review":true,"reviewer":"critic"}"#.into())
        );
        let cells: Vec<Cell<'static>> = run.cells().into_iter().map(Cell::into_owned).collect();
        assert_eq!(Run::from_cells(cells).unwrap(), run);
        run.checks = Checks::default();
        assert_eq!(at(&run, "checks"), Cell::Null, "a run without checks stores none");
        let cells: Vec<Cell<'static>> = run.cells().into_iter().map(Cell::into_owned).collect();
        assert_eq!(Run::from_cells(cells).unwrap().checks, Checks::default());
    }

    #[test]
    fn sqlite_integers_read_as_booleans_and_reals() {
        assert_eq!(bool::read(Cell::Int(1)), Ok(true));
        assert!(bool::read(Cell::Int(2)).is_err());
        assert_eq!(f64::read(Cell::Int(2)), Ok(2.0));
    }
}
