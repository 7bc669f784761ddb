"""Makes a Hermes kanban board with hermes-agent's own kanban_db: tasks in every Hermes
status, links, runs, comments and events, at the kanban.db path given. With a second
argument N, adds N more plain tasks (a large board). Prints, as one JSON object, each
status's task id and the row count of every table. Run in the test virtualenv
(`cargo xtask venv` installs the pinned hermes-agent)."""

import contextlib
import json
import os
import sys
from pathlib import Path

db = Path(sys.argv[1])
extra = int(sys.argv[2]) if len(sys.argv) > 2 else 0
# Keep Hermes away from the user's ~/.hermes: its home is the board's directory.
os.environ["HERMES_HOME"] = str(db.parent)
os.environ["HERMES_KANBAN_HOME"] = str(db.parent)
os.environ["HERMES_KANBAN_DB"] = str(db)

from hermes_cli import kanban_db as kb  # noqa: E402

ids = {}
with contextlib.closing(kb.connect(db)) as conn:
    ids["triage"] = kb.create_task(conn, title="Rough idea: a faster index", triage=True, created_by="ana")

    ids["done"] = kb.create_task(conn, title="Design the schema", assignee="coder", priority=2, created_by="ana")
    kb.claim_task(conn, ids["done"])
    kb.complete_task(conn, ids["done"], result="schema.sql written", summary="three tables",
                     metadata={"changed_files": ["schema.sql"]})
    kb.add_comment(conn, ids["done"], "bo", "Looks right to me — 看起来不错")

    ids["running"] = kb.create_task(conn, title="Write the migration", assignee="coder", parents=[ids["done"]])
    kb.recompute_ready(conn)
    kb.claim_task(conn, ids["running"])

    ids["todo"] = kb.create_task(conn, title="Ship it", parents=[ids["running"]], body="after the migration")

    ids["ready"] = kb.create_task(conn, title="Update the changelog", assignee="writer", tenant="acme",
                                  skills=["translation", "github-code-review"], max_retries=2)

    ids["blocked"] = kb.create_task(conn, title="Rotate the deploy key", assignee="ops")
    kb.claim_task(conn, ids["blocked"])
    kb.block_task(conn, ids["blocked"], reason="needs the vault password", kind="needs_input")
    kb.add_comment(conn, ids["blocked"], "ana", "asked in #ops")

    ids["scheduled"] = kb.create_task(conn, title="Nightly report", assignee="writer")
    kb.schedule_task(conn, ids["scheduled"], reason="waits for 02:00")

    # hermes-agent has no function that moves a task to review (its workers' tool does
    # it after opening a pull request); the status is set as that tool sets it.
    ids["review"] = kb.create_task(conn, title="Review the docs pull request", assignee="reviewer")
    with kb.write_txn(conn):
        conn.execute("UPDATE tasks SET status = 'review' WHERE id = ?", (ids["review"],))

    # Skill names hermes-agent's create_task would clean or refuse, as an older row may hold them.
    with kb.write_txn(conn):
        conn.execute("UPDATE tasks SET skills = ? WHERE id = ?", (json.dumps(["ok", " ok ", "bad,name", 7]), ids["todo"]))

    ids["archived"] = kb.create_task(conn, title="Old spike", created_by="bo")
    kb.archive_task(conn, ids["archived"])

    kb.link_tasks(conn, ids["done"], ids["review"])

    for n in range(extra):
        kb.create_task(conn, title=f"bulk task {n}", body="x" * 200)

    counts = {
        table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        for table in ("tasks", "task_links", "task_runs", "task_events", "task_comments")
    }
    statuses = {row[0]: row[1] for row in conn.execute("SELECT id, status FROM tasks")}

assert statuses[ids["running"]] == "running", statuses
assert statuses[ids["todo"]] == "todo" and statuses[ids["scheduled"]] == "scheduled", statuses
print(json.dumps({"ids": ids, "counts": counts}))
