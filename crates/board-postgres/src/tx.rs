//! One transaction on one pooled connection: statements prepared once per connection,
//! `BEGIN` sent with the first statement and events and `COMMIT` with the last, events
//! held back until the end, and a note of whether a failure is worth a retry.

use std::ops::ControlFlow;

use board_core::store::Visit;
use board_core::transition::NewEvent;
use board_core::{StoreError, StoreResult, TaskId, Timestamp};
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Row, Statement};

use crate::pool::Conn;
use crate::session::{Answer, Step};

pub(crate) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// An event to insert when the transaction commits.
struct PendingEvent {
    task_id: TaskId,
    run_id: Option<i64>,
    kind: String,
    payload: String,
    created_at: Timestamp,
    /// Whether it may give a dispatcher work ([`board_core::wakes_dispatcher`]).
    wakes: bool,
}

/// Statements on one connection: a transaction (begun already, see `PgStore::begin`, or
/// begun by its first statement, see [`Tx::lazy`]), rolled back when dropped
/// uncommitted, or single statements run on their own.
pub(crate) struct Tx<'a> {
    conn: &'a mut Conn,
    /// The transaction's `BEGIN`, until it goes with the first statement.
    begin: Option<&'static str>,
    /// A transaction is open: commit or roll back.
    open: bool,
    /// The last failure ended the session.
    ended: bool,
    /// The session was found ended before any statement of the transaction ran: it was
    /// lost while it sat in the pool, and the whole transaction may run on another.
    dead_on_arrival: bool,
    events: Vec<PendingEvent>,
    /// The last failure was a deadlock, a serialization failure or a clash of fresh
    /// unique keys: running the whole transaction again may succeed.
    retry: bool,
}

/// The error ended the session: the server closed it, said FATAL before closing, or
/// the socket failed under it (a reset before the client saw the close).
pub(crate) fn session_ended(e: &postgres::Error) -> bool {
    e.is_closed()
        || e.as_db_error().is_some_and(|db| db.severity() == "FATAL")
        || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// Retrying after these is safe: the transaction rolled back whole, and running it
/// again re-reads everything it decided on.
fn retryable(e: &postgres::Error) -> bool {
    let Some(db) = e.as_db_error() else {
        return false;
    };
    let code = db.code();
    *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        // Two writers drew the same random task id, or created with the same
        // idempotency key: the retry draws again, or finds the other's task.
        || (*code == SqlState::UNIQUE_VIOLATION
            && matches!(db.constraint(), Some("tasks_pkey" | "tasks_idempotency")))
}

fn unexpected_rows(found: usize) -> StoreError {
    StoreError::Backend(format!(
        "a statement returned {found} rows where one was expected"
    ))
}

impl<'a> Tx<'a> {
    /// Statements inside the transaction begun on `conn`.
    pub fn begun(conn: &'a mut Conn) -> Tx<'a> {
        Tx::on(conn, None, true)
    }

    /// Statements inside a transaction that `begin` opens, sent with the first of them.
    pub fn lazy(conn: &'a mut Conn, begin: &'static str) -> Tx<'a> {
        Tx::on(conn, Some(begin), false)
    }

    /// Statements each on their own (no events: those need a transaction).
    pub fn single(conn: &'a mut Conn) -> Tx<'a> {
        Tx::on(conn, None, false)
    }

    fn on(conn: &'a mut Conn, begin: Option<&'static str>, open: bool) -> Tx<'a> {
        Tx {
            conn,
            begin,
            open,
            ended: false,
            dead_on_arrival: false,
            events: Vec::new(),
            retry: false,
        }
    }

    pub fn session_ended(&self) -> bool {
        self.ended
    }

    pub fn dead_on_arrival(&self) -> bool {
        self.dead_on_arrival
    }

    pub fn should_retry(&self) -> bool {
        self.retry
    }

    fn fail(&mut self, e: postgres::Error) -> StoreError {
        self.retry = retryable(&e);
        self.ended = session_ended(&e);
        let lost = self.ended || self.conn.client.is_closed();
        self.conn.broken |= lost;
        // Nothing of a lazy transaction ran until its `BEGIN` was answered.
        self.dead_on_arrival = lost && self.begin.is_some();
        StoreError::Backend(crate::describe(&e))
    }

    fn prepare(&mut self, sql: &'static str) -> StoreResult<Statement> {
        if let Some(statement) = self.conn.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.conn.client.prepare(sql).map_err(|e| self.fail(e))?;
        self.conn.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    /// Sends `steps` in one round trip, after the transaction's `BEGIN` when it has not
    /// gone yet, and returns their answers.
    fn send(&mut self, steps: &[Step<'_>]) -> StoreResult<Vec<Answer>> {
        let Some(begin) = self.begin else {
            return self.conn.client.pipeline(steps).map_err(|e| self.fail(e));
        };
        let mut all = Vec::with_capacity(steps.len() + 1);
        all.push(Step::Simple(begin));
        all.extend_from_slice(steps);
        self.open = true;
        let answered = self.conn.client.pipeline(&all);
        let answers = answered.map_err(|e| self.fail(e));
        self.begin = None;
        let mut answers = answers?;
        answers.remove(0);
        Ok(answers)
    }

    /// The answer of one step.
    fn one(&mut self, step: Step<'_>) -> StoreResult<Answer> {
        let mut answers = self.send(&[step])?;
        answers
            .pop()
            .ok_or_else(|| StoreError::Backend("a statement went unanswered".into()))
    }

    pub fn query(&mut self, sql: &'static str, params: Params<'_>) -> StoreResult<Vec<Row>> {
        let statement = self.prepare(sql)?;
        Ok(self.one(Step::Query(&statement, params))?.rows())
    }

    /// Two statements in one round trip, the second run after the first has finished
    /// (and, in a transaction that reads committed data, reading what was committed
    /// before it started): the rows of each.
    pub fn query_both(
        &mut self,
        (first, first_params): (&'static str, Params<'_>),
        (second, second_params): (&'static str, Params<'_>),
    ) -> StoreResult<(Vec<Row>, Vec<Row>)> {
        let first = self.prepare(first)?;
        let second = self.prepare(second)?;
        let steps = [
            Step::Query(&first, first_params),
            Step::Query(&second, second_params),
        ];
        let mut answers = self.send(&steps)?.into_iter().map(Answer::rows);
        match (answers.next(), answers.next()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(StoreError::Backend("a statement went unanswered".into())),
        }
    }

    /// A statement run once (not kept in the cache).
    pub fn query_uncached(&mut self, sql: &str, params: Params<'_>) -> StoreResult<Vec<Row>> {
        self.start()?;
        self.conn.client.query(sql, params).map_err(|e| self.fail(e))
    }

    pub fn query_opt(&mut self, sql: &'static str, params: Params<'_>) -> StoreResult<Option<Row>> {
        let mut rows = self.query(sql, params)?;
        match rows.len() {
            0 | 1 => Ok(rows.pop()),
            n => Err(unexpected_rows(n)),
        }
    }

    pub fn query_one(&mut self, sql: &'static str, params: Params<'_>) -> StoreResult<Row> {
        let mut rows = self.query(sql, params)?;
        match rows.len() {
            1 => Ok(rows.remove(0)),
            n => Err(unexpected_rows(n)),
        }
    }

    pub fn execute(&mut self, sql: &'static str, params: Params<'_>) -> StoreResult<u64> {
        let statement = self.prepare(sql)?;
        Ok(self.one(Step::Execute(&statement, params))?.count())
    }

    /// Sends the transaction's `BEGIN` now, if it has not gone yet.
    fn start(&mut self) -> StoreResult<()> {
        if self.begin.is_some() {
            self.send(&[])?;
        }
        Ok(())
    }

    /// Runs `sql` (not kept in the cache) and hands `f` its rows one by one as the
    /// server sends them, until `f` breaks: the client holds one row at a time, and
    /// the connection's bounded channel holds back the rest.
    pub fn each_row(
        &mut self,
        sql: &str,
        params: Params<'_>,
        mut f: impl FnMut(&Row) -> StoreResult<Visit>,
    ) -> StoreResult<()> {
        self.start()?;
        let mut failed = None;
        let streamed = self.conn.client.each_row(sql, params, |row| match f(row) {
            Ok(ControlFlow::Continue(())) => true,
            Ok(ControlFlow::Break(())) => false,
            Err(e) => {
                failed = Some(e);
                false
            }
        });
        streamed.map_err(|e| self.fail(e))?;
        failed.map_or(Ok(()), Err)
    }

    /// Queues events for `task_id`; they are inserted at commit (see [`Tx::commit`]).
    pub fn push_events(&mut self, task_id: &TaskId, events: &[NewEvent], now: Timestamp) {
        self.events.extend(events.iter().map(|e| PendingEvent {
            task_id: task_id.clone(),
            run_id: e.run_id,
            kind: e.kind.as_str().to_owned(),
            payload: e.payload.to_string(),
            created_at: now,
            wakes: board_core::wakes_dispatcher(e.kind),
        }));
    }

    /// Queues an event of another board, its kind and time kept (see `import`).
    pub fn push_imported_event(
        &mut self,
        task_id: &TaskId,
        run_id: Option<i64>,
        kind: &str,
        payload: String,
        created_at: Timestamp,
    ) {
        self.events.push(PendingEvent {
            task_id: task_id.clone(),
            run_id,
            kind: kind.to_owned(),
            payload,
            created_at,
            wakes: kind
                .parse::<board_core::EventKind>()
                .is_ok_and(board_core::wakes_dispatcher),
        });
    }

    /// Inserts the queued events and commits.
    ///
    /// Event ids must appear in commit order, or a reader following the stream
    /// (`events --follow` asks for ids above the last it saw) would skip an event that
    /// committed after a higher id. PostgreSQL does not serialise writers, so the
    /// events take a transaction-scoped advisory lock of the board (`events_lock`) and
    /// draw their ids under it: ids are handed out in the order the lock is taken, and
    /// the lock is held until commit. Every row lock is taken before it, so it is never
    /// held while waiting for a row.
    ///
    /// When an event may give a dispatcher work ([`board_core::wakes_dispatcher`]), the
    /// transaction also notifies the board's wake-up channel (`wake`): PostgreSQL
    /// delivers the notification to every listening gateway when, and only if, the
    /// transaction commits.
    ///
    /// The events' insert and the `COMMIT` go together, in one round trip: when the
    /// insert fails, the server has aborted the transaction and takes the `COMMIT` for a
    /// rollback, and the insert's error is the one returned.
    pub fn commit(mut self, events_lock: (i32, i32), wake: &str) -> Result<(), (StoreError, bool)> {
        if self.begin.is_some() {
            if self.events.is_empty() {
                // Nothing was sent: nothing to commit.
                return Ok(());
            }
            // `BEGIN` alone first: a round trip that may have run `COMMIT` is never
            // taken for one that ran nothing.
            self.start().map_err(|e| (e, false))?;
        }
        let events = std::mem::take(&mut self.events);
        let wake = events.iter().any(|e| e.wakes).then_some(wake);
        let insert = match events.is_empty() {
            true => None,
            false => Some(self.prepare(INSERT_EVENTS).map_err(|e| (e, self.retry))?),
        };
        let task_ids: Vec<&str> = events.iter().map(|e| e.task_id.as_str()).collect();
        let run_ids: Vec<Option<i64>> = events.iter().map(|e| e.run_id).collect();
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        let payloads: Vec<&str> = events.iter().map(|e| e.payload.as_str()).collect();
        let created: Vec<Timestamp> = events.iter().map(|e| e.created_at).collect();
        let (class, key) = events_lock;
        let params: Params<'_> = &[
            &class, &key, &task_ids, &run_ids, &kinds, &payloads, &created, &wake,
        ];
        let mut steps = Vec::with_capacity(2);
        if let Some(insert) = &insert {
            steps.push(Step::Execute(insert, params));
        }
        steps.push(Step::Simple("COMMIT"));
        self.open = false;
        match self.send(&steps) {
            Ok(_) => Ok(()),
            Err(e) => Err((e, self.retry)),
        }
    }
}

/// Inserts the queued events and, with `$8`, notifies that channel. The lock's row is
/// joined to every event row, so it is taken before the first id is drawn, and the sorted
/// subquery hands the rows to the insert (which draws the ids) in the order they were
/// queued. The notification, if any, rides along: the server sends it at commit whatever
/// its place in the transaction.
const INSERT_EVENTS: &str = "WITH inserted AS (
        INSERT INTO task_events (task_id, run_id, kind, payload, created_at)
        SELECT task_id, run_id, kind, payload, created_at FROM (
           SELECT e.* FROM (SELECT pg_advisory_xact_lock($1, $2)) AS event_lock,
               unnest($3::text[], $4::int8[], $5::text[], $6::text[], $7::int8[])
                   WITH ORDINALITY AS e(task_id, run_id, kind, payload, created_at, n)
           ORDER BY e.n) AS queued)
     SELECT pg_notify($8, '') WHERE $8::text IS NOT NULL";

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open && self.conn.client.batch_execute("ROLLBACK").is_err() {
            // Still inside a transaction, or gone: either way never to be reused.
            self.conn.broken = true;
        }
    }
}
