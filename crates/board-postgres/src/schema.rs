//! The schema of docs/storage.md on PostgreSQL, its forward-only migrations, and the stamp
//! that says a schema is a board and which version it is at.
//!
//! The tables and columns are SQLite's (docs/storage.md), in PostgreSQL types: BIGINT
//! Unix seconds, TEXT ids, JSON kept as TEXT so a payload reads back byte for byte, and
//! BOOLEAN for the one flag. Ids sort bytewise (`COLLATE "C"`), as in SQLite.
//! `kanban_meta` holds one row, `(application_id, schema_version)`, rewritten by the
//! transaction that migrates. A migration is appended, never edited.

use crate::session::Session;
use crate::{LockClass, OpenError};

/// "KBRD": the application id stamped on every board, as on the SQLite file.
pub const APPLICATION_ID: i64 = 0x4B42_5244;

/// Each entry takes the schema from version `index` to `index + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the board.
    r#"
    CREATE TABLE kanban_meta (
        application_id BIGINT NOT NULL,
        schema_version BIGINT NOT NULL
    );

    CREATE TABLE tasks (
        id TEXT COLLATE "C" PRIMARY KEY,
        title TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        assignee TEXT,
        status TEXT NOT NULL,
        priority BIGINT NOT NULL DEFAULT 0,
        created_by TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        started_at BIGINT,
        completed_at BIGINT,
        result TEXT,
        current_run_id BIGINT,
        claim_lock TEXT,
        claim_expires BIGINT,
        worker_pid BIGINT,
        last_heartbeat_at BIGINT,
        block_kind TEXT,
        block_recurrences BIGINT NOT NULL DEFAULT 0,
        consecutive_failures BIGINT NOT NULL DEFAULT 0,
        last_failure_error TEXT,
        max_runtime_seconds BIGINT,
        idempotency_key TEXT,
        revision BIGINT NOT NULL DEFAULT 0,
        decompose_failures BIGINT NOT NULL DEFAULT 0,
        decompose_next_attempt_at BIGINT,
        decompose_parked BOOLEAN NOT NULL DEFAULT FALSE,
        decompose_last_error TEXT,
        -- Insertion order, SQLite's rowid: ties in the claim order go by it, not by the
        -- random id.
        seq BIGINT GENERATED ALWAYS AS IDENTITY,
        -- Invariant 1, enforced by the database itself as a last line of defence.
        CHECK ((status = 'running') = (current_run_id IS NOT NULL)),
        CHECK ((current_run_id IS NULL) = (claim_lock IS NULL))
    );
    -- Ready queue, running set (and so expired leases) and per-status listings, in
    -- claim order.
    CREATE INDEX tasks_by_status ON tasks (status, priority DESC, created_at, seq);
    -- Due triage cards, proportional to unparked triage cards only.
    CREATE INDEX tasks_triage_due ON tasks (decompose_next_attempt_at, created_at)
        WHERE status = 'triage' AND NOT decompose_parked;
    CREATE UNIQUE INDEX tasks_idempotency ON tasks (idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    -- Run ids come from the sequence (CACHE 1: increasing across sessions).
    CREATE TABLE task_runs (
        id BIGSERIAL PRIMARY KEY,
        task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
        profile TEXT,
        status TEXT NOT NULL,
        outcome TEXT,
        claim_lock TEXT,
        claim_expires BIGINT,
        worker_pid BIGINT,
        last_heartbeat_at BIGINT,
        started_at BIGINT NOT NULL,
        ended_at BIGINT,
        summary TEXT,
        error TEXT,
        metadata TEXT,
        CHECK ((ended_at IS NULL) = (outcome IS NULL))
    );
    CREATE INDEX task_runs_by_task ON task_runs (task_id, id);
    -- Invariant 2: at most one open run per task. Writers here are not serialised as
    -- SQLite's are, so the database keeps this guarantee too.
    CREATE UNIQUE INDEX task_runs_one_open ON task_runs (task_id) WHERE ended_at IS NULL;

    CREATE TABLE task_links (
        parent_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
        child_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
        PRIMARY KEY (parent_id, child_id),
        CHECK (parent_id <> child_id)
    );
    CREATE INDEX task_links_by_child ON task_links (child_id, parent_id);

    CREATE TABLE task_events (
        id BIGSERIAL PRIMARY KEY,
        task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
        run_id BIGINT,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        created_at BIGINT NOT NULL
    );
    CREATE INDEX task_events_by_task ON task_events (task_id, id);
    CREATE INDEX task_events_decomposed ON task_events (task_id) WHERE kind = 'decomposed';

    CREATE TABLE task_comments (
        id BIGSERIAL PRIMARY KEY,
        task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
        author TEXT,
        body TEXT NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE INDEX task_comments_by_task ON task_comments (task_id, id);

    CREATE TABLE llm_calls (
        id BIGSERIAL PRIMARY KEY,
        task_id TEXT COLLATE "C",
        purpose TEXT NOT NULL,
        model TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        duration_ms BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        http_status BIGINT,
        prompt_tokens BIGINT,
        completion_tokens BIGINT,
        error TEXT
    );
    CREATE INDEX llm_calls_by_task ON llm_calls (task_id, id);
    "#,
    // 2: several gateways on one board. The host whose gateway started a run's worker
    // (only that host signals or adopts it), and the decomposition leases: a card leased
    // to one gateway is selected by no other until the lease lapses.
    r#"
    ALTER TABLE tasks ADD COLUMN worker_host TEXT;
    ALTER TABLE task_runs ADD COLUMN worker_host TEXT;
    CREATE TABLE decomposition_leases (
        task_id TEXT COLLATE "C" PRIMARY KEY REFERENCES tasks (id),
        holder TEXT NOT NULL,
        expires BIGINT NOT NULL
    );
    "#,
    // 3: cost safety. Each ledger row carries its cost and whether a person sent it past
    // a spend ceiling; the ceilings sum the last 24 hours through the time index; the
    // provider breaker is one row of JSON (board_core::Breaker), present from the start
    // so a writer can lock it.
    r#"
    ALTER TABLE llm_calls ADD COLUMN cost DOUBLE PRECISION;
    ALTER TABLE llm_calls ADD COLUMN over_budget BOOLEAN NOT NULL DEFAULT FALSE;
    CREATE INDEX llm_calls_by_time ON llm_calls (started_at);
    CREATE TABLE provider_breaker (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        state TEXT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    INSERT INTO provider_breaker (id, state, updated_at) VALUES (1, '{}', 0);
    "#,
    // 4: the metrics count decompositions by outcome at every scrape: the events that end
    // one are indexed on their own, so the count reads them and not every event.
    r#"
    CREATE INDEX task_events_decompositions ON task_events (kind)
        WHERE kind IN ('decomposed', 'specified', 'auto_decompose_failed', 'auto_decompose_parked');
    "#,
    // 5: a list of the whole board in claim order walks this index instead of sorting
    // every row first.
    r#"
    CREATE INDEX tasks_by_priority ON tasks (priority DESC, created_at, seq);
    "#,
    // 6: checks before work counts (docs/board.md#checks): a task's reviewer, its own
    // verifiers and the counts of failed verifications and review rounds; a run's kind
    // (work, verify, review), the checks its completion must pass and its evidence.
    r#"
    ALTER TABLE tasks ADD COLUMN reviewer TEXT;
    ALTER TABLE tasks ADD COLUMN verify_failures BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN review_rounds BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN verify TEXT;
    ALTER TABLE task_runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'work';
    ALTER TABLE task_runs ADD COLUMN checks TEXT;
    ALTER TABLE task_runs ADD COLUMN evidence TEXT;
    CREATE INDEX task_events_verdicts ON task_events (kind)
        WHERE kind IN ('verify_failed', 'changes_requested');
    "#,
    // 7: lanes (docs/lanes.md): agents outside the gateway, each a name, its profiles and
    // its token's digest; the lane that holds a task's run, and that held each run. The
    // partial indexes serve a lane's cap (tasks it holds) and its counts (its runs).
    r#"
    CREATE TABLE lanes (
        name TEXT PRIMARY KEY,
        profiles TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT,
        last_seen_at BIGINT,
        waiting_until BIGINT
    );
    ALTER TABLE tasks ADD COLUMN lane TEXT;
    ALTER TABLE task_runs ADD COLUMN lane TEXT;
    CREATE INDEX tasks_by_lane ON tasks (lane) WHERE lane IS NOT NULL;
    CREATE INDEX task_runs_by_lane ON task_runs (lane, outcome) WHERE lane IS NOT NULL;
    "#,
    // 8: Hermes' per-task fields: a tenant (its partial index serves `list --tenant` in
    // claim order), the skills a worker is asked to load (a JSON array) and the task's own
    // failure limit.
    r#"
    ALTER TABLE tasks ADD COLUMN tenant TEXT;
    ALTER TABLE tasks ADD COLUMN skills TEXT;
    ALTER TABLE tasks ADD COLUMN max_retries BIGINT;
    CREATE INDEX tasks_by_tenant ON tasks (tenant, priority DESC, created_at, seq) WHERE tenant IS NOT NULL;
    "#,
    // 9: work that waits for a time (`schedule --at`): when a scheduled task's time
    // comes; the partial index is the gateway's read of the due ones, in time order.
    r#"
    ALTER TABLE tasks ADD COLUMN scheduled_until BIGINT;
    CREATE INDEX tasks_scheduled_due ON tasks (scheduled_until)
        WHERE status = 'scheduled' AND scheduled_until IS NOT NULL;
    "#,
    // 10: recurring tasks (`schedule --every`): the template's rule and what it has made
    // (JSON); the template waits in `scheduled` with its next time, so the due index
    // above serves it too.
    r#"
    ALTER TABLE tasks ADD COLUMN recurrence TEXT;
    "#,
    // 11: files on cards (`kanban attach`): the bytes in the row with their SHA-256, one
    // name per card.
    r#"
    CREATE TABLE task_attachments (
        id BIGSERIAL PRIMARY KEY,
        task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
        name TEXT NOT NULL,
        content_type TEXT,
        size BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        content BYTEA NOT NULL,
        created_by TEXT,
        created_at BIGINT NOT NULL,
        UNIQUE (task_id, name)
    );
    "#,
    // 12: notifications (`kanban notify-subscribe`): a webhook, what it hears, its signing
    // key and its cursor over the events (moved only past a delivered one).
    r#"
    CREATE TABLE notify_subscriptions (
        id BIGSERIAL PRIMARY KEY,
        task_id TEXT COLLATE "C" REFERENCES tasks (id),
        kinds TEXT NOT NULL,
        url TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        after_event BIGINT NOT NULL,
        failures BIGINT NOT NULL DEFAULT 0,
        next_attempt_at BIGINT,
        paused BOOLEAN NOT NULL DEFAULT FALSE,
        last_status TEXT,
        last_attempt_at BIGINT
    );
    "#,
];

/// The schema version this binary writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What the schema says it is.
pub(crate) struct Identity {
    /// `(application_id, schema_version)` from `kanban_meta`, when it has a row.
    stamp: Option<(i64, i64)>,
    /// Tables, views and sequences in the schema, counted only when it has no stamp
    /// (0 otherwise).
    objects: i64,
    pub version: i64,
}

pub(crate) fn identity(client: &mut Session) -> Result<Identity, postgres::Error> {
    // An index lookup by name. The count of the schema's objects, which only an empty
    // schema or another application's needs, reads all of pg_class (no index leads with
    // the namespace): on a server of many tables, or a catalog that many dropped schemas
    // have bloated, that is milliseconds at every open.
    let stamped: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = current_schema() AND c.relname = 'kanban_meta')",
            &[],
        )?
        .get(0);
    let stamp: Option<(i64, i64)> = match stamped {
        true => client
            .query(
                "SELECT application_id, schema_version FROM kanban_meta LIMIT 1",
                &[],
            )?
            .first()
            .map(|r| (r.get(0), r.get(1))),
        false => None,
    };
    let objects = match stamp {
        Some(_) => 0,
        None => client
            .query_one(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')",
                &[],
            )?
            .get(0),
    };
    Ok(Identity {
        version: stamp.map_or(0, |(_, v)| v),
        stamp,
        objects,
    })
}

/// Refuses a schema that is not an empty one or one of our boards at a version this
/// binary knows.
pub(crate) fn check_identity(target: &str, found: &Identity) -> Result<(), OpenError> {
    let foreign = |found: String| OpenError::Foreign {
        target: target.to_owned(),
        found,
    };
    match found.stamp {
        Some((app, _)) if app != APPLICATION_ID => {
            return Err(foreign(format!(
                "a schema of another application (application id {app:#x})"
            )));
        }
        None if found.objects > 0 => {
            return Err(foreign(format!(
                "a schema of another application ({} tables, no kanban stamp)",
                found.objects
            )));
        }
        _ => {}
    }
    if found.version > SCHEMA_VERSION {
        return Err(OpenError::Newer {
            target: target.to_owned(),
            found: found.version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

pub(crate) enum Migration {
    Refused(OpenError),
    Failed(postgres::Error),
}

impl From<postgres::Error> for Migration {
    fn from(e: postgres::Error) -> Migration {
        Migration::Failed(e)
    }
}

/// Applies the missing migrations and the new stamp in one transaction, under the
/// schema's migration lock; the identity is read again under it, since another process
/// may have migrated meanwhile.
pub(crate) fn migrate(client: &mut Session, target: &str, key: i32) -> Result<(), Migration> {
    client.batch_execute("BEGIN")?;
    let migrated = migrate_in(client, target, key);
    let end = client.batch_execute(if migrated.is_ok() { "COMMIT" } else { "ROLLBACK" });
    migrated?;
    Ok(end?)
}

fn migrate_in(client: &mut Session, target: &str, key: i32) -> Result<(), Migration> {
    client.execute(
        "SELECT pg_advisory_xact_lock($1, $2)",
        &[&(LockClass::Migrate as i32), &key],
    )?;
    let found = identity(client)?;
    check_identity(target, &found).map_err(Migration::Refused)?;
    if found.version == SCHEMA_VERSION {
        // Migrated by another process while this one waited: nothing to write.
        return Ok(());
    }
    for sql in MIGRATIONS.iter().skip(found.version as usize) {
        client.batch_execute(sql)?;
    }
    client.execute("DELETE FROM kanban_meta", &[])?;
    client.execute(
        "INSERT INTO kanban_meta (application_id, schema_version) VALUES ($1, $2)",
        &[&APPLICATION_ID, &SCHEMA_VERSION],
    )?;
    Ok(())
}
