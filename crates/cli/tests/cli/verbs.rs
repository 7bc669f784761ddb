//! Every verb's happy path, in human and JSON mode, each on its own board.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{bare, get, Board};
use predicates::prelude::*;
use serde_json::json;

#[test]
fn first_command_creates_the_home_and_init_is_idempotent() {
    let board = Board::new();
    board.create(&["first"]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&board.home()), 0o700);
    assert_eq!(mode(&board.home().join("config.yaml")), 0o600);
    assert!(board.db().exists());

    std::fs::write(board.home().join("config.yaml"), "kanban:\n  max_spawn: 1\n").expect("write");
    let out = board.json(&["init"]);
    assert_eq!(out["created_home"], false);
    assert_eq!(out["created_config"], false);
    let config = std::fs::read_to_string(board.home().join("config.yaml")).expect("read");
    assert_eq!(
        config, "kanban:\n  max_spawn: 1\n",
        "init never overwrites a config"
    );
    board
        .kanban(&["init"])
        .assert()
        .success()
        .stdout(predicate::str::contains("(kept)"));
}

#[test]
fn init_writes_the_commented_defaults() {
    let board = Board::new();
    let out = board.json(&["init"]);
    assert_eq!(out["created_home"], true);
    assert_eq!(out["created_config"], true);
    let config = std::fs::read_to_string(board.home().join("config.yaml")).expect("read");
    for key in [
        "claim_ttl_seconds: 900",
        "failure_limit: 2",
        "decompose_max_children: 16",
        "# ",
    ] {
        assert!(config.contains(key), "{key} missing from the template");
    }
}

#[test]
fn home_comes_from_kanban_home() {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("via-env");
    bare()
        .env("KANBAN_HOME", &home)
        .args(["create", "from env"])
        .assert()
        .success();
    assert!(home.join("kanban.db").exists());
}

#[test]
fn an_empty_kanban_home_is_a_one_line_error_not_another_board() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = bare()
        .env("KANBAN_HOME", "")
        .env("HOME", dir.path())
        .args(["create", "lost"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "kanban: KANBAN_HOME is set but empty: name the board's home directory or unset it\n"
    );
    assert!(!dir.path().join(".kanban").exists(), "no fallback to ~/.kanban");
}

#[test]
fn global_flags_go_anywhere() {
    let board = Board::init();
    let home = board.home();
    let home = home.to_str().expect("utf-8 path");
    bare()
        .args(["--json", "create", "a", "--home", home])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("{"));
    bare()
        .args(["create", "--home", home, "b", "--json"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("{"));
    assert_eq!(board.json(&["ls"]).as_array().map(Vec::len), Some(2));
}

#[test]
fn create_human_and_json() {
    let board = Board::init();
    board
        .kanban(&["create", "write the notes"])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"^Created t_[0-9a-f]{8,}  \(ready, assignee=default\)\n$")
                .expect("regex"),
        );
    let parent = board.create(&["parent"]);
    let task = board.json(&[
        "create",
        "child",
        "--body",
        "the body",
        "--assignee",
        "coder",
        "--parent",
        &parent,
        "--priority",
        "-3",
        "--idempotency-key",
        "k1",
        "--max-runtime",
        "15m",
    ]);
    assert_eq!(task["status"], "todo");
    assert_eq!(task["body"], "the body");
    assert_eq!(task["assignee"], "coder");
    assert_eq!(task["priority"], -3);
    assert_eq!(task["max_runtime_seconds"], 900);
    assert_eq!(task["idempotency_key"], "k1");
    let keys: Vec<&str> = task
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys[..5], ["id", "title", "body", "assignee", "status"]);
    for internal in ["claim_lock", "claim_expires", "worker_pid", "last_heartbeat_at"] {
        assert!(!keys.contains(&internal), "{internal} leaked");
    }
    // The same idempotency key returns the first task.
    let again = board.json(&["create", "child again", "--idempotency-key", "k1"]);
    assert_eq!(again["id"], task["id"]);
    for (text, secs) in [("90", 90), ("90s", 90), ("2h", 7200)] {
        let t = board.json(&["create", "timed", "--max-runtime", text]);
        assert_eq!(t["max_runtime_seconds"], secs, "{text}");
    }
    let triage = board.json(&["create", "rough idea", "--triage"]);
    assert_eq!(triage["status"], "triage");
}

#[test]
fn create_reads_the_body_from_a_file_or_stdin() {
    let board = Board::init();
    let file = board.dir.path().join("body.md");
    std::fs::write(&file, "from a file\n").expect("write");
    let a = board.json(&["create", "a", "--body-file", file.to_str().expect("utf-8")]);
    assert_eq!(a["body"], "from a file\n");
    let out = board
        .kanban(&["create", "b", "--body-file", "-", "--json"])
        .write_stdin("from stdin")
        .output()
        .expect("run");
    assert!(out.status.success());
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(b["body"], "from stdin");
}

#[test]
fn a_megabyte_body_and_sql_metacharacters_are_stored_verbatim() {
    let board = Board::init();
    let body = "x'); DROP TABLE tasks; --\n".repeat(40_000);
    let title = r#"it's "quoted"; DELETE FROM tasks WHERE 1=1; -- %_\"#;
    let out = board
        .kanban(&["create", title, "--body-file", "-", "--json"])
        .write_stdin(body.clone())
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let task: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = task["id"].as_str().expect("id");
    let stored = get(&board, id);
    assert_eq!(stored.title, title);
    assert_eq!(stored.body, body);
}

#[test]
fn list_filters_and_json() {
    let board = Board::init();
    let a = board.create(&["a", "--assignee", "coder", "--priority", "5"]);
    let b = board.create(&["b"]);
    board.ok(&["archive", &b]);
    board.create(&["c", "--triage"]);
    let all = board.json(&["list"]);
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(2),
        "archived hidden by default"
    );
    assert_eq!(all[0]["id"], a.as_str(), "priority first");
    assert_eq!(
        board.json(&["ls", "--archived"]).as_array().map(Vec::len),
        Some(3)
    );
    let coder = board.json(&["ls", "--assignee", "coder"]);
    assert_eq!(coder.as_array().map(Vec::len), Some(1));
    let archived = board.json(&["ls", "--status", "archived"]);
    assert_eq!(archived[0]["id"], b.as_str());
    let human = board.ok(&["ls", "--status", "triage"]);
    assert!(human.contains("? triage"), "{human}");
    assert_eq!(Board::init().ok(&["ls"]), "no tasks\n");
    assert_eq!(Board::init().json(&["ls"]), json!([]));
}

#[test]
fn show_human_and_json() {
    let board = Board::init();
    let parent = board.create(&["parent"]);
    let child = board.create(&["child", "--parent", &parent, "--body", "line one\nline two"]);
    board.ok(&["comment", &child, "a note", "--author", "ann"]);
    let human = board.ok(&["show", &child]);
    for part in [
        "child",
        "Body",
        "line two",
        "Parents",
        &parent,
        "Comments",
        "ann: a note",
        "Events",
        "created",
    ] {
        assert!(human.contains(part), "{part} missing from:\n{human}");
    }
    let shown = board.json(&["show", &child]);
    let keys: Vec<&str> = shown
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "task",
            "parents",
            "children",
            "runs",
            "comments",
            "attachments",
            "events",
            "events_omitted",
            "block_reason",
            "latest_summary"
        ]
    );
    assert_eq!(shown["parents"][0]["id"], parent.as_str());
    assert_eq!(shown["comments"][0]["body"], "a note");
}

#[test]
fn show_keeps_the_last_twenty_events() {
    let board = Board::init();
    let id = board.create(&["busy"]);
    for i in 0..25 {
        board.ok(&["edit", &id, "--priority", &i.to_string()]);
    }
    let shown = board.json(&["show", &id]);
    let events = shown["events"].as_array().expect("events");
    assert_eq!(events.len(), 20);
    assert_eq!(events[19]["kind"], "edited");
    assert!(board.ok(&["show", &id]).contains("Events (last 20 of 26)"));
}

#[test]
fn edit_assign_link_unlink() {
    let board = Board::init();
    let a = board.create(&["a"]);
    let b = board.create(&["b"]);
    let edited = board.json(&["edit", &a, "--title", "A", "--body", "body", "--priority", "2"]);
    assert_eq!(
        (edited["title"].as_str(), edited["priority"].as_i64()),
        (Some("A"), Some(2))
    );
    assert!(board
        .ok(&["edit", &a, "--title", "AA"])
        .starts_with(&format!("Edited {a}")));
    assert_eq!(board.json(&["assign", &a, "coder"])["assignee"], "coder");
    assert_eq!(
        board.ok(&["assign", &a, "none"]),
        format!("Assigned {a} to (unassigned)\n")
    );
    assert_eq!(
        board.json(&["link", &a, &b]),
        json!({"parent_id": a, "child_id": b})
    );
    assert_eq!(get(&board, &b).status, board_core::Status::Todo);
    assert_eq!(board.ok(&["unlink", &a, &b]), format!("Unlinked {a} -> {b}\n"));
    assert_eq!(board.ok(&["link", &a, &b]), format!("Linked {a} -> {b}\n"));
    board.json(&["unlink", &a, &b]);
}

#[test]
fn claim_heartbeat_complete() {
    let board = Board::init();
    let id = board.create(&["work"]);
    assert_eq!(board.ok(&["claim", &id]), "1\n");
    assert_eq!(
        board.ok(&["heartbeat", &id, "--note", "halfway"]),
        format!("Heartbeat recorded for {id}\n")
    );
    assert_eq!(
        board.json(&["heartbeat", &id, "--run", "1"]),
        json!({"task_id": id, "ok": true})
    );
    let done = board.json(&[
        "complete",
        &id,
        "--run",
        "1",
        "--result",
        "42",
        "--summary",
        "s",
        "--metadata",
        r#"{"n":1}"#,
    ]);
    assert_eq!(done, json!({"task_id": id, "ok": true}));
    let task = get(&board, &id);
    assert_eq!(task.result.as_deref(), Some("42"));
    let runs = board.json(&["runs", &id]);
    assert_eq!(runs[0]["outcome"], "completed");
    assert_eq!(runs[0]["metadata"], json!({"n": 1}));

    let other = board.create(&["other"]);
    assert_eq!(
        board.json(&["claim", &other, "--ttl", "60"]),
        json!({"task_id": other, "run_id": 2})
    );
    assert_eq!(board.ok(&["complete", &other]), format!("Completed {other}\n"));
}

#[test]
fn complete_several_and_unclaimed() {
    let board = Board::init();
    let a = board.create(&["a"]);
    let b = board.create(&["b"]);
    let out = board.ok(&["complete", &a, &b, "--summary", "by hand", "--json"]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        lines,
        [
            json!({"task_id": a, "ok": true}),
            json!({"task_id": b, "ok": true})
        ]
    );
}

#[test]
fn block_unblock_reclaim_archive() {
    let board = Board::init();
    let id = board.create(&["work"]);
    board.ok(&["claim", &id]);
    assert_eq!(
        board.ok(&["block", &id, "need a key", "--kind", "needs_input"]),
        format!("Blocked {id}: need a key\n")
    );
    let task = get(&board, &id);
    assert_eq!(task.status, board_core::Status::Blocked);
    assert_eq!(task.block_kind, Some(board_core::BlockKind::NeedsInput));
    let unblocked = board.json(&["unblock", &id, "--reason", "key given"]);
    assert_eq!(unblocked[0]["status"], "ready");
    board.ok(&["claim", &id]);
    assert_eq!(
        board.json(&["block", &id, "--run", "2"]),
        json!({"task_id": id, "ok": true})
    );
    assert!(board
        .ok(&["unblock", &id])
        .starts_with(&format!("Unblocked {id}")));

    board.ok(&["claim", &id]);
    assert_eq!(
        board.ok(&["reclaim", &id, "--reason", "stuck"]),
        format!("Reclaimed {id}\n")
    );
    board.ok(&["claim", &id]);
    assert_eq!(
        board.json(&["reclaim", &id, "--run", "4"]),
        json!({"task_id": id, "ok": true, "outcome": "reclaimed"})
    );
    assert_eq!(get(&board, &id).status, board_core::Status::Ready);

    let other = board.create(&["other"]);
    assert!(board.ok(&["archive", &id]).starts_with(&format!("Archived {id}")));
    let archived = board.json(&["archive", &other]);
    assert_eq!(archived[0]["status"], "archived");
}

#[test]
fn comment_runs_events() {
    let board = Board::init();
    let id = board.create(&["work"]);
    assert!(board
        .ok(&["comment", &id, "hello"])
        .starts_with(&format!("Comment added to {id}")));
    let comment = board.json(&["comment", &id, "again", "--author", "bob"]);
    assert_eq!(
        (comment["author"].as_str(), comment["body"].as_str()),
        (Some("bob"), Some("again"))
    );
    assert_eq!(board.ok(&["runs", &id]), "no runs\n");
    assert_eq!(board.json(&["runs", &id]), json!([]));
    board.ok(&["claim", &id]);
    assert!(board.ok(&["runs", &id]).contains("running"));
    let events = board.json(&["events", &id]);
    let kinds: Vec<&str> = events
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"created"));
    assert_eq!(kinds.last(), Some(&"claimed"));
    let all = board.ok(&["events"]);
    assert!(all.contains(&id) && all.contains("claimed"), "{all}");
}

#[test]
fn completions_print_scripts_without_a_board() {
    for shell in ["bash", "zsh", "fish"] {
        bare()
            .args(["completions", shell])
            .env("HOME", "/nonexistent-home-for-test")
            .assert()
            .success()
            .stdout(predicate::str::contains("kanban"));
    }
}

#[test]
fn help_reads_well() {
    bare()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Claim a ready task by hand"));
    for verb in ["create", "list", "show", "claim", "complete", "block"] {
        bare()
            .args([verb, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"));
    }
}

#[test]
fn help_lists_every_verb_with_a_summary() {
    let out = bare().arg("--help").output().expect("run");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("utf-8");
    let commands: Vec<(&str, &str)> = help
        .lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.trim().split_once(' '))
        .map(|(verb, summary)| (verb, summary.trim()))
        .collect();
    for verb in [
        "init",
        "create",
        "list",
        "show",
        "edit",
        "assign",
        "link",
        "unlink",
        "claim",
        "heartbeat",
        "complete",
        "block",
        "unblock",
        "reclaim",
        "archive",
        "comment",
        "runs",
        "events",
        "context",
        "stats",
        "config",
        "decompose",
        "specify",
        "dispatch",
        "gateway",
        "completions",
    ] {
        let summary = commands
            .iter()
            .find(|(name, _)| *name == verb)
            .map(|(_, summary)| *summary)
            .unwrap_or_else(|| panic!("{verb} is not listed:\n{help}"));
        assert!(summary.len() > 10, "{verb} has no summary: {summary:?}");
    }
    for verb in ["context", "stats", "events"] {
        bare().args([verb, "--help"]).assert().success().stdout(
            predicate::str::contains("Examples:").and(predicate::str::contains(format!("kanban {verb}"))),
        );
    }
}

/// `create` without `--assignee` takes `kanban.default_assignee`; a triage card stays
/// unassigned for the decomposer to route.
#[test]
fn create_applies_the_default_assignee_except_to_triage() {
    let board = Board::init();
    assert_eq!(board.json(&["create", "plain"])["assignee"], "default");
    std::fs::write(
        board.home().join("config.yaml"),
        "kanban:\n  default_assignee: coder\n",
    )
    .unwrap();
    assert_eq!(board.json(&["create", "routed"])["assignee"], "coder");
    assert_eq!(
        board.json(&["create", "named", "--assignee", "writer"])["assignee"],
        "writer"
    );
    assert!(board.json(&["create", "idea", "--triage"])["assignee"].is_null());
}
