//! The schema of docs/storage.md and its forward-only migrations.
//!
//! `PRAGMA application_id` marks the file as ours; `PRAGMA user_version` is the number of
//! migrations applied. A migration is appended, never edited.

/// "KBRD": the `application_id` stamped on every board file.
pub const APPLICATION_ID: i32 = 0x4B42_5244;

/// Each entry takes the schema from version `index` to `index + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: the board.
    r#"
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY NOT NULL,
        title TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        assignee TEXT,
        status TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        created_by TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        started_at INTEGER,
        completed_at INTEGER,
        result TEXT,
        current_run_id INTEGER,
        claim_lock TEXT,
        claim_expires INTEGER,
        worker_pid INTEGER,
        last_heartbeat_at INTEGER,
        block_kind TEXT,
        block_recurrences INTEGER NOT NULL DEFAULT 0,
        consecutive_failures INTEGER NOT NULL DEFAULT 0,
        last_failure_error TEXT,
        max_runtime_seconds INTEGER,
        idempotency_key TEXT,
        revision INTEGER NOT NULL DEFAULT 0,
        decompose_failures INTEGER NOT NULL DEFAULT 0,
        decompose_next_attempt_at INTEGER,
        decompose_parked INTEGER NOT NULL DEFAULT 0,
        decompose_last_error TEXT,
        -- Invariant 1, enforced by the file itself as a last line of defence.
        CHECK ((status = 'running') = (current_run_id IS NOT NULL)),
        CHECK ((current_run_id IS NULL) = (claim_lock IS NULL))
    );
    -- Ready queue, running set and per-status listings: status, then claim order.
    CREATE INDEX tasks_by_status ON tasks(status, priority DESC, created_at, id);
    -- Expired leases, proportional to running tasks only.
    CREATE INDEX tasks_leases ON tasks(claim_expires) WHERE status = 'running';
    -- Due triage cards, proportional to unparked triage cards only.
    CREATE INDEX tasks_triage_due ON tasks(decompose_next_attempt_at, created_at)
        WHERE status = 'triage' AND decompose_parked = 0;
    CREATE UNIQUE INDEX tasks_idempotency ON tasks(idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    CREATE TABLE task_runs (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL REFERENCES tasks(id),
        profile TEXT,
        status TEXT NOT NULL,
        outcome TEXT,
        claim_lock TEXT,
        claim_expires INTEGER,
        worker_pid INTEGER,
        last_heartbeat_at INTEGER,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        summary TEXT,
        error TEXT,
        metadata TEXT,
        CHECK ((ended_at IS NULL) = (outcome IS NULL))
    );
    CREATE INDEX task_runs_by_task ON task_runs(task_id, id);
    -- Invariant 2: at most one open run per task.
    CREATE UNIQUE INDEX task_runs_one_open ON task_runs(task_id) WHERE ended_at IS NULL;

    CREATE TABLE task_links (
        parent_id TEXT NOT NULL REFERENCES tasks(id),
        child_id TEXT NOT NULL REFERENCES tasks(id),
        PRIMARY KEY (parent_id, child_id),
        CHECK (parent_id <> child_id)
    ) WITHOUT ROWID;
    CREATE INDEX task_links_by_child ON task_links(child_id, parent_id);

    CREATE TABLE task_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL REFERENCES tasks(id),
        run_id INTEGER,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        created_at INTEGER NOT NULL
    );
    CREATE INDEX task_events_by_task ON task_events(task_id, id);
    CREATE INDEX task_events_decomposed ON task_events(task_id) WHERE kind = 'decomposed';

    CREATE TABLE task_comments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL REFERENCES tasks(id),
        author TEXT,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX task_comments_by_task ON task_comments(task_id, id);

    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT,
        purpose TEXT NOT NULL,
        model TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        http_status INTEGER,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        error TEXT
    );
    CREATE INDEX llm_calls_by_task ON llm_calls(task_id, id);
    "#,
    // 2: ties in the claim order go by insertion (rowid), not by the random task id, so
    // two tasks created in the same second keep the order they were created in.
    r#"
    DROP INDEX tasks_by_status;
    CREATE INDEX tasks_by_status ON tasks(status, priority DESC, created_at);
    "#,
    // 3: fewer pages written per claim and completion. Event ids come from the rowid
    // (never reused: events are never deleted) instead of AUTOINCREMENT, which wrote
    // sqlite_sequence in every transaction; expired leases are found through
    // tasks_by_status (the running tasks), so tasks_leases goes; and the one-open-run
    // index goes: invariant 2 is the core's, applied under the write lock with a
    // compare-and-set on the claim, and proven by the property and race tests, while
    // the index cost two page writes per run.
    r#"
    CREATE TABLE task_events_v3 (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL REFERENCES tasks(id),
        run_id INTEGER,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        created_at INTEGER NOT NULL
    );
    INSERT INTO task_events_v3 (id, task_id, run_id, kind, payload, created_at)
        SELECT id, task_id, run_id, kind, payload, created_at FROM task_events;
    DROP TABLE task_events;
    ALTER TABLE task_events_v3 RENAME TO task_events;
    CREATE INDEX task_events_by_task ON task_events(task_id, id);
    CREATE INDEX task_events_decomposed ON task_events(task_id) WHERE kind = 'decomposed';
    DROP INDEX tasks_leases;
    DROP INDEX task_runs_one_open;
    "#,
    // 4: several gateways on one board. The host whose gateway started a run's worker
    // (only that host signals or adopts it), and the decomposition leases: a card leased
    // to one gateway is selected by no other until the lease lapses.
    r#"
    ALTER TABLE tasks ADD COLUMN worker_host TEXT;
    ALTER TABLE task_runs ADD COLUMN worker_host TEXT;
    CREATE TABLE decomposition_leases (
        task_id TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id),
        holder TEXT NOT NULL,
        expires INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 5: cost safety. Each ledger row carries its cost and whether a person sent it past
    // a spend ceiling; the ceilings sum the last 24 hours through the time index; the
    // provider breaker is one row of JSON (board_core::Breaker).
    r#"
    ALTER TABLE llm_calls ADD COLUMN cost REAL;
    ALTER TABLE llm_calls ADD COLUMN over_budget INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX llm_calls_by_time ON llm_calls(started_at);
    CREATE TABLE provider_breaker (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        state TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
    "#,
    // 6: the metrics count decompositions by outcome at every scrape: the events that end
    // one are indexed on their own, so the count reads them and not every event.
    r#"
    CREATE INDEX task_events_decompositions ON task_events(kind)
        WHERE kind IN ('decomposed', 'specified', 'auto_decompose_failed', 'auto_decompose_parked');
    "#,
    // 7: `stats` reads the tasks per assignee and status from a table the file keeps
    // itself, so its cost does not grow with the board. Triggers on `tasks` keep it in
    // the same transaction as every write; `assigned` 0 (with `assignee` '') stands for
    // an unassigned task, so the key has no null. Rows that reach zero stay, and reads
    // skip them.
    r#"
    CREATE TABLE task_counts (
        assigned INTEGER NOT NULL,
        assignee TEXT NOT NULL,
        status TEXT NOT NULL,
        tasks INTEGER NOT NULL,
        PRIMARY KEY (assigned, assignee, status)
    ) WITHOUT ROWID;
    INSERT INTO task_counts (assigned, assignee, status, tasks)
        SELECT assignee IS NOT NULL, COALESCE(assignee, ''), status, COUNT(*)
        FROM tasks GROUP BY 1, 2, 3;
    CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
        INSERT INTO task_counts (assigned, assignee, status, tasks)
            VALUES (NEW.assignee IS NOT NULL, COALESCE(NEW.assignee, ''), NEW.status, 1)
            ON CONFLICT (assigned, assignee, status) DO UPDATE SET tasks = tasks + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET tasks = tasks - 1
            WHERE assigned = (OLD.assignee IS NOT NULL) AND assignee = COALESCE(OLD.assignee, '')
              AND status = OLD.status;
    END;
    CREATE TRIGGER task_counts_update AFTER UPDATE OF status, assignee ON tasks
        WHEN OLD.status IS NOT NEW.status OR OLD.assignee IS NOT NEW.assignee BEGIN
        UPDATE task_counts SET tasks = tasks - 1
            WHERE assigned = (OLD.assignee IS NOT NULL) AND assignee = COALESCE(OLD.assignee, '')
              AND status = OLD.status;
        INSERT INTO task_counts (assigned, assignee, status, tasks)
            VALUES (NEW.assignee IS NOT NULL, COALESCE(NEW.assignee, ''), NEW.status, 1)
            ON CONFLICT (assigned, assignee, status) DO UPDATE SET tasks = tasks + 1;
    END;
    "#,
    // 8: a list of the whole board in claim order (`kanban list`, `list --json`) walks
    // this index instead of sorting every row first, so it streams in bounded memory. A
    // claim or a completion does not change these columns, so they never write it.
    r#"
    CREATE INDEX tasks_by_priority ON tasks(priority DESC, created_at);
    "#,
    // 9: `archive --rm` may remove the newest event, whose id SQLite would otherwise
    // hand out again (an events cursor would then skip the new event). The floor holds
    // the largest event id ever handed out; an insert takes one more than the larger of
    // it and the table's largest (`rows::INSERT_EVENT`).
    r#"
    CREATE TABLE event_floor (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        id INTEGER NOT NULL
    );
    "#,
    // 10: checks before work counts (docs/board.md#checks): a task's reviewer, its own
    // verifiers and the counts of failed verifications and review rounds; a run's kind
    // (work, verify, review), the checks its completion must pass and its evidence.
    r#"
    ALTER TABLE tasks ADD COLUMN reviewer TEXT;
    ALTER TABLE tasks ADD COLUMN verify_failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN review_rounds INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN verify TEXT;
    ALTER TABLE task_runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'work';
    ALTER TABLE task_runs ADD COLUMN checks TEXT;
    ALTER TABLE task_runs ADD COLUMN evidence TEXT;
    CREATE INDEX task_events_verdicts ON task_events(kind)
        WHERE kind IN ('verify_failed', 'changes_requested');
    "#,
    // 11: lanes (docs/lanes.md): agents outside the gateway, each a name, its profiles and
    // its token's digest; the lane that holds a task's run, and that held each run. The
    // partial indexes serve a lane's cap (tasks it holds) and its counts (its runs).
    r#"
    CREATE TABLE lanes (
        name TEXT PRIMARY KEY,
        profiles TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER,
        last_seen_at INTEGER,
        waiting_until INTEGER
    ) WITHOUT ROWID;
    ALTER TABLE tasks ADD COLUMN lane TEXT;
    ALTER TABLE task_runs ADD COLUMN lane TEXT;
    CREATE INDEX tasks_by_lane ON tasks(lane) WHERE lane IS NOT NULL;
    CREATE INDEX task_runs_by_lane ON task_runs(lane, outcome) WHERE lane IS NOT NULL;
    "#,
    // 12: Hermes' per-task fields: a tenant (its partial index serves `list --tenant` in
    // claim order), the skills a worker is asked to load (a JSON array) and the task's own
    // failure limit.
    r#"
    ALTER TABLE tasks ADD COLUMN tenant TEXT;
    ALTER TABLE tasks ADD COLUMN skills TEXT;
    ALTER TABLE tasks ADD COLUMN max_retries INTEGER;
    CREATE INDEX tasks_by_tenant ON tasks(tenant, priority DESC, created_at) WHERE tenant IS NOT NULL;
    "#,
    // 13: work that waits for a time (`schedule --at`): when a scheduled task's time
    // comes; the partial index is the gateway's read of the due ones, in time order.
    r#"
    ALTER TABLE tasks ADD COLUMN scheduled_until INTEGER;
    CREATE INDEX tasks_scheduled_due ON tasks(scheduled_until)
        WHERE status = 'scheduled' AND scheduled_until IS NOT NULL;
    "#,
    // 14: recurring tasks (`schedule --every`): the template's rule and what it has made
    // (JSON); the template waits in `scheduled` with its next time, so the due index
    // above serves it too.
    r#"
    ALTER TABLE tasks ADD COLUMN recurrence TEXT;
    "#,
    // 15: files on cards (`kanban attach`): the bytes in the row with their SHA-256, one
    // name per card.
    r#"
    CREATE TABLE task_attachments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL REFERENCES tasks(id),
        name TEXT NOT NULL,
        content_type TEXT,
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        content BLOB NOT NULL,
        created_by TEXT,
        created_at INTEGER NOT NULL,
        UNIQUE (task_id, name)
    );
    "#,
    // 16: notifications (`kanban notify-subscribe`): a webhook, what it hears, its signing
    // key and its cursor over the events (moved only past a delivered one).
    r#"
    CREATE TABLE notify_subscriptions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT REFERENCES tasks(id),
        kinds TEXT NOT NULL,
        url TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        after_event INTEGER NOT NULL,
        failures INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER,
        paused INTEGER NOT NULL DEFAULT 0,
        last_status TEXT,
        last_attempt_at INTEGER
    );
    "#,
];

/// The schema version this binary writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
