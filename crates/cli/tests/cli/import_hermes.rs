//! `kanban import-hermes` on boards made by the real hermes-agent package
//! (`hermes/make_board.py`, run in `target/venv`): everything comes over once with its
//! ids, the Hermes file is never written, and bad files and rows are refused or skipped
//! with their reasons.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use board_core::{check_invariants, Status};
use serde_json::Value;

use crate::common::{venv_python, Board};

/// Makes a Hermes board at `db` with `extra` more plain tasks; returns the script's
/// report: each Hermes status's task id, and every table's row count.
fn hermes_board(db: &Path, extra: usize) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/hermes/make_board.py");
    let out = std::process::Command::new(venv_python())
        .arg(script)
        .arg(db)
        .arg(extra.to_string())
        .output()
        .expect("run python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the script's JSON")
}

/// Runs a Python snippet against the Hermes file with the standard library's sqlite3.
fn python(code: &str, db: &Path) {
    let out = std::process::Command::new(venv_python())
        .args(["-c", code])
        .arg(db)
        .output()
        .expect("run python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The directory's file names with each file's bytes and modification time.
fn files(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            let modified = e.metadata().unwrap().modified().unwrap();
            (e.file_name().to_string_lossy().into_owned(), (bytes, modified))
        })
        .collect()
}

#[test]
fn a_hermes_board_comes_over_whole_and_once_and_is_never_written() {
    let hermes_dir = tempfile::tempdir().unwrap();
    let db = hermes_dir.path().join("kanban.db");
    let made = hermes_board(&db, 450);
    let before = files(hermes_dir.path());
    let board = Board::init();
    let path = db.to_str().unwrap();

    let report = board.json(&["import-hermes", path]);
    let counts = &made["counts"];
    assert_eq!(report["tasks_imported"], counts["tasks"], "{report:#}");
    assert_eq!(report["tasks_imported"], 459);
    for (ours, theirs) in [
        ("runs", "task_runs"),
        ("events", "task_events"),
        ("comments", "task_comments"),
    ] {
        assert_eq!(report[ours], counts[theirs], "{ours}: {report:#}");
    }
    assert_eq!(report["links_added"], counts["task_links"], "{report:#}");
    assert_eq!(report["not_imported"], serde_json::json!([]));
    assert!(
        report["statuses_mapped"].get("review -> blocked").is_none(),
        "review is a status of this board too: {report:#}"
    );

    let snapshot = board.snapshot();
    check_invariants(&snapshot).expect("the board's invariants hold after the import");
    // Hermes' profiles do not come over: every assignee of an open task is named, once,
    // with what to add; gateway status names the same until one gets a command.
    let mut open: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for t in &snapshot.tasks {
        if let (Some(who), false) = (&t.assignee, matches!(t.status, Status::Done | Status::Archived)) {
            let entry = open.entry(who.clone()).or_default();
            entry.0 += 1;
            entry.1 += u64::from(t.status == Status::Ready);
        }
    }
    assert!(!open.is_empty(), "the Hermes board has assigned open tasks");
    let named = |list: &serde_json::Value| -> std::collections::BTreeMap<String, (u64, u64)> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let profile = p["profile"].as_str().unwrap().to_owned();
                assert!(
                    p["fix"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("profiles.{profile}.command")),
                    "{p}"
                );
                (
                    profile,
                    (p["open"].as_u64().unwrap(), p["ready"].as_u64().unwrap()),
                )
            })
            .collect()
    };
    assert_eq!(named(&report["profiles_without_command"]), open, "{report:#}");
    let status = board.json(&["gateway", "status"]);
    assert_eq!(named(&status["unrunnable"]), open);
    let (first, _) = open.iter().next().unwrap();
    board.ok(&[
        "config",
        "set",
        &format!("profiles.{first}.command"),
        "[\"true\"]",
    ]);
    let status = board.json(&["gateway", "status"]);
    assert!(!named(&status["unrunnable"]).contains_key(first), "{status:#}");
    let said = board.ok(&["gateway", "status"]);
    assert!(said.contains("waiting") && said.contains("profiles."), "{said}");
    let status = |hermes: &str| {
        let id = made["ids"][hermes].as_str().unwrap();
        let task = snapshot
            .tasks
            .iter()
            .find(|t| t.id.as_str() == id)
            .expect("the id is kept");
        task.status
    };
    for (hermes, ours) in [
        ("triage", Status::Triage),
        ("todo", Status::Todo),
        ("scheduled", Status::Scheduled),
        ("ready", Status::Ready),
        ("running", Status::Ready),
        ("blocked", Status::Blocked),
        ("review", Status::Review),
        ("done", Status::Done),
        ("archived", Status::Archived),
    ] {
        assert_eq!(status(hermes), ours, "hermes {hermes}");
    }
    let done = made["ids"]["done"].as_str().unwrap();
    let shown = board.json(&["show", done]);
    assert_eq!(shown["task"]["result"], "schema.sql written");
    assert_eq!(shown["comments"][0]["body"], "Looks right to me — 看起来不错");
    assert_eq!(shown["runs"][0]["outcome"], "completed");
    // Hermes' tenant, skills and retry limit come over; a skill this board cannot
    // carry is left out and named in the task's `imported` event.
    let ready = board.json(&["show", made["ids"]["ready"].as_str().unwrap()]);
    assert_eq!(ready["task"]["tenant"], "acme");
    assert_eq!(
        ready["task"]["skills"],
        serde_json::json!(["translation", "github-code-review"])
    );
    assert_eq!(ready["task"]["max_retries"], 2);
    let todo = made["ids"]["todo"].as_str().unwrap();
    assert_eq!(
        board.json(&["show", todo])["task"]["skills"],
        serde_json::json!(["ok"])
    );
    let events = board.json(&["events", todo, "--kind", "imported"]);
    assert_eq!(
        events[0]["payload"]["skills_dropped"],
        serde_json::json!(["bad,name", "7"])
    );
    let scheduled = made["ids"]["scheduled"].as_str().unwrap();
    let events = board.json(&["events", scheduled]);
    let imported = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!(imported["kind"], "imported");
    assert_eq!(imported["payload"]["hermes_status"], "scheduled");

    let again = board.json(&["import-hermes", path]);
    assert_eq!(
        (again["tasks_imported"].as_u64(), again["tasks_present"].as_u64()),
        (Some(0), Some(459))
    );
    assert_eq!(
        (again["links_added"].as_u64(), again["runs"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(board.snapshot(), snapshot, "a second import changes nothing");
    assert_eq!(
        files(hermes_dir.path()),
        before,
        "the Hermes directory is byte for byte as it was"
    );
}

#[test]
fn a_file_that_is_not_a_hermes_board_gets_one_line() {
    let board = Board::init();
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, b"not a database at all").unwrap();
    let hermes = dir.path().join("kanban.db");
    hermes_board(&hermes, 0);
    let newer = dir.path().join("newer.db");
    std::fs::copy(&hermes, &newer).unwrap();
    python("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version = 7'); c.commit()", &newer);
    let empty = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.db");
    python("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE notes (a)'); c.commit()", &other);
    let cases = [
        (garbage, "not an SQLite database"),
        (board.db(), "a board of this kanban, not a Hermes one"),
        (newer, "newer than this import knows (user_version 7)"),
        (other, "not a Hermes kanban board (no table tasks)"),
        (dir.path().join("absent.db"), "No such file"),
        (empty.path().to_path_buf(), "no Hermes board here"),
    ];
    let before = board.snapshot();
    for (path, expected) in cases {
        let out = board
            .kanban(&["import-hermes", path.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(
            stderr.contains(expected) && stderr.lines().count() == 1,
            "{}: {stderr}",
            path.display()
        );
    }
    assert_eq!(board.snapshot(), before);
}

/// Rows a hand or a bug could leave in a Hermes file: each is skipped with its reason,
/// or repaired (text that is not UTF-8), and the rest comes over.
const GARBAGE: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
now = 1796000000
c.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('not-an-id', 'x', 'ready', ?)", (now,))
c.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_aaaa0001', 'when?', 'ready', 'yesterday')")
c.execute("INSERT INTO tasks (id, title, body, status, created_at) VALUES ('t_aaaa0002', 'huge', ?, 'todo', ?)", ("y" * 5000, now))
c.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_aaaa0003', CAST(x'ff4f4b' AS TEXT), 'someday', ?)", (now,))
c.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_aaaa0004', '   ', 'todo', ?)", (now,))
c.execute("INSERT INTO task_events (task_id, kind, payload, created_at) VALUES ('t_aaaa0003', '  ', '{}', ?)", (now,))
c.execute("INSERT INTO task_events (task_id, kind, payload, created_at) VALUES ('t_aaaa0003', 'noted', 'not json', ?)", (now,))
c.execute("INSERT INTO task_comments (task_id, author, body, created_at) VALUES ('t_aaaa0003', 'ana', '  ', ?)", (now,))
c.execute("INSERT INTO task_links (parent_id, child_id) VALUES ('t_aaaa0003', 't_ffff0000')")
c.commit()
"#;

#[test]
fn garbage_rows_are_skipped_with_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kanban.db");
    hermes_board(&db, 0);
    python(GARBAGE, &db);
    let board = Board::init();
    std::fs::write(
        board.home().join("config.yaml"),
        "kanban:\n  max_text_bytes: 1000\n",
    )
    .unwrap();
    let report = board.json(&["import-hermes", db.to_str().unwrap()]);
    let skipped: Vec<(String, String, String)> = report["not_imported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let field = |k: &str| s[k].as_str().unwrap().to_owned();
            (field("what"), field("id"), field("reason"))
        })
        .collect();
    let has = |what: &str, id: &str, reason: &str| {
        skipped
            .iter()
            .any(|(w, i, r)| w == what && i.contains(id) && r.contains(reason))
    };
    assert!(has("task", "not-an-id", "not a task id"), "{skipped:#?}");
    assert!(
        has("task", "t_aaaa0001", "created_at is not an integer"),
        "{skipped:#?}"
    );
    assert!(
        has(
            "task",
            "t_aaaa0002",
            "body is 5000 bytes, over the 1000-byte limit"
        ),
        "{skipped:#?}"
    );
    assert!(has("task", "t_aaaa0004", "blank"), "{skipped:#?}");
    assert!(has("event", "", "no kind"), "{skipped:#?}");
    assert!(has("comment", "", "blank"), "{skipped:#?}");
    assert!(
        has("link", "t_aaaa0003 -> t_ffff0000", "did not come over"),
        "{skipped:#?}"
    );
    assert_eq!(
        report["tasks_imported"], 10,
        "the nine good tasks and the repaired one"
    );
    let repaired = board.json(&["show", "t_aaaa0003"]);
    assert_eq!(repaired["task"]["title"], "\u{fffd}OK");
    assert_eq!(
        repaired["task"]["status"], "blocked",
        "a status this board lacks waits for a person"
    );
    let kinds: Vec<&str> = repaired["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["noted", "imported"]);
    check_invariants(&board.snapshot()).expect("invariants");
}

/// Runs `kanban ARGS` on `board`, failing the test if it has not ended in 30 s (a
/// hostile file must not hang the import).
fn within_a_deadline(board: &Board, args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(crate::common::KANBAN)
        .arg("--home")
        .arg(board.home())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ended = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > ended {
            let _ = child.kill();
            panic!("kanban {args:?} still running after 30 s");
        }
        std::thread::yield_now();
    }
    child.wait_with_output().unwrap()
}

/// A Hermes board whose `tasks` is an endless recursive view over the real rows.
const ENDLESS_VIEW: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("ALTER TABLE tasks RENAME TO tasks_rows")
c.execute("CREATE VIEW tasks AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT tasks_rows.* FROM tasks_rows, n")
c.commit()
"#;

/// A Hermes board as a crash leaves it: a row only in its WAL, no `-shm`, copied aside
/// while the connection that wrote it is still open.
const CRASHED: &str = r#"
import os, shutil, sqlite3, sys
src = sys.argv[1]
c = sqlite3.connect(src)
c.execute("PRAGMA journal_mode=wal")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_aaaa0009', 'only in the wal', 'todo', 1796000000)")
c.execute("INSERT INTO tasks (id, title, status, created_at) VALUES (?, 'escapes', 'todo', 1796000000)", ("t_\x1b]0;owned\x07\x1b[2J",))
c.commit()
dst = os.path.join(os.path.dirname(src), "crashed")
os.makedirs(dst)
shutil.copy(src, os.path.join(dst, "kanban.db"))
shutil.copy(src + "-wal", os.path.join(dst, "kanban.db-wal"))
"#;

#[test]
fn hostile_hermes_files_are_refused_or_read_without_writing_beside_them() {
    let board = Board::init();
    let dir = tempfile::tempdir().unwrap();
    let before = board.snapshot();

    // A FIFO would block an open for reading until someone writes to it.
    let fifo = dir.path().join("fifo.db");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let out = within_a_deadline(&board, &["import-hermes", fifo.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");

    let endless = dir.path().join("endless.db");
    hermes_board(&endless, 0);
    python(ENDLESS_VIEW, &endless);
    let out = within_a_deadline(&board, &["import-hermes", endless.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("tasks is a view, not a table"), "{stderr}");
    assert_eq!(board.snapshot(), before, "a refused file changed the board");

    let source = dir.path().join("kanban.db");
    hermes_board(&source, 0);
    python(CRASHED, &source);
    let crashed = dir.path().join("crashed");
    let untouched = files(&crashed);
    let out = within_a_deadline(
        &board,
        &["import-hermes", crashed.join("kanban.db").to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains('\x1b') && !stdout.contains('\x07'), "{stdout:?}");
    assert!(
        stdout.contains("t_ ]0;owned"),
        "the hostile id is shown, blanked: {stdout}"
    );
    assert_eq!(
        board.json(&["show", "t_aaaa0009"])["task"]["title"],
        "only in the wal",
        "the row only the WAL holds came over"
    );
    assert_eq!(
        files(&crashed),
        untouched,
        "nothing was written beside the Hermes file"
    );
}
