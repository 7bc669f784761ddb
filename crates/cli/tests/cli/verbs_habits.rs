//! The verbs and flags a Hermes user reaches for: unquoted words for `block` and
//! `comment`, `reassign`, who a comment or a task is from, `list --mine` and
//! `--assignee none`, `create` saying `exists`, `config get/set/path`, `dispatch --max`,
//! `-v`. Each test reads the board (or the file) after the command.

use crate::common;

use board_core::Status;
use common::{get, Board, USER};
use serde_json::Value;

/// The newest event of `kind` on task `id`.
fn last_event(board: &Board, id: &str, kind: &str) -> Value {
    let shown = board.json(&["show", id]);
    let events = shown["events"].as_array().expect("events").clone();
    events
        .into_iter()
        .rev()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event on {id}: {shown}"))
}

fn comments(board: &Board, id: &str) -> Vec<Value> {
    board.json(&["show", id])["comments"]
        .as_array()
        .expect("comments")
        .clone()
}

/// `kanban ARGS` as the worker of run `run` on task `id`, with profile `coder`.
fn as_worker(board: &Board, id: &str, run: &str, args: &[&str]) -> String {
    let out = board
        .kanban(args)
        .env("KANBAN_TASK", id)
        .env("KANBAN_RUN_ID", run)
        .env("KANBAN_PROFILE", "coder")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn block_takes_its_reason_unquoted_or_quoted() {
    let board = Board::init();
    let a = board.create(&["a"]);
    board.ok(&[
        "block",
        &a,
        "waiting",
        "for",
        "the",
        "API",
        "key",
        "--kind",
        "needs_input",
    ]);
    assert_eq!(get(&board, &a).status, Status::Blocked);
    let blocked = last_event(&board, &a, "blocked");
    assert_eq!(blocked["payload"]["reason"], "waiting for the API key");
    assert_eq!(blocked["payload"]["kind"], "needs_input");

    let b = board.create(&["b"]);
    board.ok(&["block", &b, "one quoted reason"]);
    assert_eq!(
        last_event(&board, &b, "blocked")["payload"]["reason"],
        "one quoted reason"
    );

    // Inside a worker the id may be left out: every word is the reason.
    let c = board.create(&["c"]);
    let run = board.ok(&["claim", &c]).trim().to_owned();
    as_worker(&board, &c, &run, &["block", "cannot", "reach", "the", "database"]);
    assert_eq!(get(&board, &c).status, Status::Blocked);
    assert_eq!(
        last_event(&board, &c, "blocked")["payload"]["reason"],
        "cannot reach the database"
    );
}

#[test]
fn comment_takes_its_text_unquoted_and_says_who_wrote_it() {
    let board = Board::init();
    let a = board.create(&["a"]);
    board.ok(&["comment", &a, "the", "tests", "pass"]);
    board.ok(&["comment", &a, "quoted text", "--author", "alice"]);
    let all = comments(&board, &a);
    assert_eq!(all[0]["body"], "the tests pass");
    assert_eq!(all[0]["author"], USER, "the login name by default");
    assert_eq!(all[1]["body"], "quoted text");
    assert_eq!(all[1]["author"], "alice");
    // An id alone is a comment whose text was left out, and says so.
    let bare = board.kanban(&["comment", &a]).output().unwrap();
    assert_eq!(bare.status.code(), Some(2), "{bare:?}");
    let said = String::from_utf8_lossy(&bare.stderr);
    assert!(said.contains("needs the comment's text after the id"), "{said}");
    assert_eq!(comments(&board, &a).len(), 2, "nothing written");

    // A worker comments on its own task, as its profile; an id first still names a task.
    let run = board.ok(&["claim", &a]).trim().to_owned();
    as_worker(&board, &a, &run, &["comment", "found", "the", "cause"]);
    let other = board.create(&["other"]);
    as_worker(&board, &a, &run, &["comment", &other, "see", "this"]);
    let all = comments(&board, &a);
    assert_eq!(all[2]["body"], "found the cause");
    assert_eq!(all[2]["author"], "coder");
    let on_other = comments(&board, &other);
    assert_eq!(on_other[0]["body"], "see this");
    assert_eq!(on_other[0]["author"], "coder");
}

#[test]
fn a_task_says_who_created_it() {
    let board = Board::init();
    let mine = board.create(&["mine"]);
    assert_eq!(get(&board, &mine).created_by.as_deref(), Some(USER));
    let bobs = board.create(&["bob's", "--created-by", "bob"]);
    assert_eq!(get(&board, &bobs).created_by.as_deref(), Some("bob"));
    let host = board.create(&["host"]);
    let run = board.ok(&["claim", &host]).trim().to_owned();
    let out = as_worker(&board, &host, &run, &["create", "follow-up", "--json"]);
    let task: Value = serde_json::from_str(&out).expect("json");
    let id = task["id"].as_str().expect("id");
    assert_eq!(get(&board, id).created_by.as_deref(), Some("coder"));
}

#[test]
fn reassign_reclaims_a_running_task_only_when_asked() {
    let board = Board::init();
    let ready = board.create(&["ready", "--assignee", "coder"]);
    let task = board.json(&["reassign", &ready, "reviewer"]);
    assert_eq!(task["assignee"], "reviewer");
    assert_eq!(get(&board, &ready).assignee.as_deref(), Some("reviewer"));

    let running = board.create(&["running", "--assignee", "coder"]);
    board.ok(&["claim", &running]);
    let before = board.snapshot();
    let out = board
        .kanban(&["reassign", &running, "reviewer"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(board.snapshot(), before, "refused without --reclaim");

    let said = board.ok(&["reassign", &running, "reviewer", "--reclaim"]);
    assert!(
        said == format!("Reassigned {running} to reviewer (claim reclaimed)\n"),
        "{said}"
    );
    let after = get(&board, &running);
    assert_eq!(after.status, Status::Ready);
    assert_eq!(after.assignee.as_deref(), Some("reviewer"));
    assert_eq!(
        last_event(&board, &running, "reclaimed")["payload"]["reason"],
        "reassigned to reviewer"
    );
    board.ok(&["reassign", &running, "none"]);
    assert_eq!(get(&board, &running).assignee, None);
}

#[test]
fn list_mine_and_the_unassigned() {
    let board = Board::init();
    let mine = board.create(&["mine", "--assignee", USER]);
    let coders = board.create(&["coder's", "--assignee", "coder"]);
    let nobodys = board.create(&["nobody's", "--assignee", "none"]);
    let ids = |list: Value| -> Vec<String> {
        list.as_array()
            .expect("array")
            .iter()
            .map(|t| t["id"].as_str().expect("id").to_owned())
            .collect()
    };
    assert_eq!(ids(board.json(&["list", "--mine"])), [mine]);
    assert_eq!(ids(board.json(&["list", "--assignee", "none"])), [nobodys]);
    assert_eq!(
        ids(board.json(&["list", "--assignee", "coder"])),
        [coders.as_str()]
    );
    // Outside a worker, the profile the environment names is mine (Hermes' variable too).
    for var in ["KANBAN_PROFILE", "HERMES_PROFILE"] {
        let out = board
            .kanban(&["list", "--mine", "--json"])
            .env(var, "coder")
            .output()
            .unwrap();
        let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(ids(listed), [coders.as_str()], "{var}");
    }
    let run = board.ok(&["claim", &coders]).trim().to_owned();
    let out = as_worker(&board, &coders, &run, &["list", "--mine", "--json"]);
    assert_eq!(ids(serde_json::from_str(&out).expect("json")), [coders]);
}

#[test]
fn list_sorts_by_the_field_asked_for_and_pages_in_that_order() {
    let board = Board::init();
    let low = board.create(&["b low", "--priority", "1"]);
    let high = board.create(&["c high", "--priority", "9"]);
    let first = board.create(&["A first"]);
    board.ok(&["edit", low.as_str(), "--body", "changed"]);
    let ids = |args: &[&str]| -> Vec<String> {
        board
            .json(args)
            .as_array()
            .expect("array")
            .iter()
            .map(|t| t["id"].as_str().expect("id").to_owned())
            .collect()
    };
    assert_eq!(ids(&["list"]), [high.as_str(), low.as_str(), first.as_str()]);
    assert_eq!(
        ids(&["list", "--sort", "title"]),
        [first.as_str(), low.as_str(), high.as_str()]
    );
    assert_eq!(
        ids(&["list", "--sort", "created"]),
        [low.as_str(), high.as_str(), first.as_str()]
    );
    assert_eq!(
        ids(&["list", "--sort", "title", "--after", first.as_str()]),
        [low.as_str(), high.as_str()]
    );
    assert_eq!(
        ids(&["list", "--sort", "title", "--after", low.as_str()]),
        [high.as_str()]
    );
}

#[test]
fn create_none_overrides_the_default_assignee() {
    let board = Board::init();
    board.ok(&["config", "set", "kanban.default_assignee", "coder"]);
    let defaulted = board.create(&["defaulted"]);
    let nobodys = board.create(&["nobody's", "--assignee", "none"]);
    assert_eq!(get(&board, &defaulted).assignee.as_deref(), Some("coder"));
    assert_eq!(get(&board, &nobodys).assignee, None);
}

#[test]
fn create_with_a_used_key_says_exists() {
    let board = Board::init();
    let first = board.json(&["create", "once", "--idempotency-key", "k"]);
    assert_eq!(first["outcome"], "created");
    let again = board.json(&["create", "twice", "--idempotency-key", "k"]);
    assert_eq!(again["outcome"], "exists");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["title"], "once");
    let said = board.ok(&["create", "thrice", "--idempotency-key", "k"]);
    assert!(
        said.starts_with(&format!("Exists {}", first["id"].as_str().expect("id"))),
        "{said}"
    );
    assert_eq!(board.snapshot().tasks.len(), 1);
}

#[test]
fn archive_rm_deletes_archived_tasks_for_good() {
    let board = Board::init();
    let (parent, other) = (board.create(&["parent"]), board.create(&["other"]));
    let child = board.create(&["child", "--parent", &parent]);
    board.ok(&["comment", &parent, "noted"]);
    board.ok(&["archive", &parent, &other]);
    // The child is live: its parent stays; `other` goes all the same.
    let out = board
        .kanban(&["archive", "--rm", &parent, &other])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "task {parent} is linked (directly or through others) to {child}, which is not archived"
        )),
        "{stderr}"
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with(&format!("Deleted {other}")), "{said}");
    board.ok(&["archive", &child]);
    let all = board.json(&["events", "--all"]);
    let newest = all.as_array().and_then(|a| a.last()).expect("events")["id"]
        .as_i64()
        .expect("id");
    let deleted = board.json(&["archive", "--rm", &child, &parent]);
    assert_eq!(deleted[0]["id"], child.as_str());
    assert_eq!(deleted[1]["deleted"], true);
    assert_eq!(deleted[1]["freed"]["comments"], 1);
    assert_eq!(deleted[1]["freed"]["links"], 0, "the link went with the child");
    let snapshot = board.snapshot();
    assert!(snapshot.tasks.is_empty(), "{:?}", snapshot.tasks);
    assert!(snapshot.events.is_empty() && snapshot.runs.is_empty() && snapshot.links.is_empty());
    // The ids of the deleted events, the newest included, are not handed out again.
    let next = board.create(&["next"]);
    let events = board.json(&["events", &next]);
    assert!(events[0]["id"].as_i64().expect("id") > newest, "{events}");
}

#[test]
fn config_get_set_and_path() {
    let board = Board::init();
    let path = board.home().join("config.yaml");
    assert_eq!(board.ok(&["config", "path"]).trim(), path.display().to_string());
    assert_eq!(board.ok(&["config", "get", "kanban.max_spawn"]).trim(), "4");
    let set = board.json(&["config", "set", "kanban.max_spawn", "7"]);
    assert_eq!(set["value"], 7);
    assert_eq!(board.ok(&["config", "get", "kanban.max_spawn"]).trim(), "7");
    assert_eq!(board.json(&["config", "check"])["kanban"]["max_spawn"], 7);
    let text = std::fs::read_to_string(&path).expect("config");
    assert!(text.contains("max_spawn: 7"), "{text}");

    // A secret is written, never shown.
    let said = board.ok(&["config", "set", "model.api_key", "sk-secret-value"]);
    assert!(!said.contains("sk-secret-value"), "{said}");
    let shown = board.ok(&["config", "get", "model.api_key"]);
    assert!(!shown.contains("sk-secret-value"), "{shown}");
    let text = std::fs::read_to_string(&path).expect("config");
    assert!(text.contains("sk-secret-value"), "the key is in the file");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn dispatch_max_spawns_no_more_than_it_says() {
    let board = Board::init();
    let config = "kanban:\n  max_spawn: 4\n\
         profiles:\n  worker:\n    description: sleeps\n    command: [\"sleep\", \"30\"]\n";
    std::fs::write(board.home().join("config.yaml"), config).expect("config");
    let tasks: Vec<String> = (0..3)
        .map(|i| board.create(&[&format!("t{i}"), "--assignee", "worker"]))
        .collect();
    let plan = board.json(&["dispatch", "--dry-run", "--max", "1"]);
    assert_eq!(plan["spawned"].as_array().map(Vec::len), Some(1), "{plan}");
    // With -v the pass logs on stderr, as the gateway does; its report stays on stdout.
    let out = board
        .kanban(&["-v", "dispatch", "--max", "2", "--json"])
        .output()
        .expect("run");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["spawned"].as_array().map(Vec::len), Some(2), "{report}");
    assert_eq!(log.matches("spawned a worker").count(), 2, "{log}");
    let running: Vec<&String> = tasks
        .iter()
        .filter(|id| get(&board, id).status == Status::Running)
        .collect();
    assert_eq!(running.len(), 2, "two workers, the third task still ready");
    for id in &tasks {
        board.ok(&["archive", id]);
    }
}

#[test]
fn completions_offer_the_statuses_and_block_kinds() {
    let board = Board::new();
    let script = board.ok(&["completions", "bash"]);
    for word in ["needs_input", "capability", "blocked", "triage"] {
        assert!(script.contains(word), "{word} is not offered");
    }
}

#[test]
fn verbosity_and_rust_log_reach_every_verb() {
    let board = Board::init();
    let quiet = board.kanban(&["ls"]).output().expect("run");
    assert!(quiet.stderr.is_empty());
    let out = board
        .kanban(&["ls"])
        .env("RUST_LOG", "[not a filter")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("kanban: RUST_LOG: "));
    let out = board.kanban(&["-v", "-q", "ls"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn assignees_lists_profiles_and_assignees_in_hermes_layout() {
    let board = Board::init();
    board.ok(&["config", "set", "profiles.coder.command", "[\"true\"]"]);
    board.create(&["a", "--assignee", "coder"]);
    board.create(&["b", "--assignee", "writer"]);
    let gone = board.create(&["c", "--assignee", "writer"]);
    board.ok(&["archive", &gone]);
    let shown = board.ok(&["assignees"]);
    // Hermes prints f"{name:20s}  {on_disk:8s}  {counts}", counts as status=n or (idle).
    let hermes_row = |name: &str, on_disk: &str, counts: &str| format!("{name:20}  {on_disk:8}  {counts}");
    let expected = [
        hermes_row("NAME", "ON DISK", "COUNTS"),
        hermes_row("coder", "yes", "ready=1"),
        hermes_row("default", "yes", "(idle)  (no command here)"),
        hermes_row("writer", "no", "ready=1  (no command here)"),
    ];
    assert_eq!(shown.lines().collect::<Vec<_>>(), expected, "{shown}");
    let listed = board.json(&["assignees"]);
    assert_eq!(listed[2]["name"], "writer");
    assert_eq!(listed[2]["on_disk"], false);
    assert_eq!(listed[2]["runnable"], false);
    assert_eq!(
        listed[2]["counts"],
        serde_json::json!({"ready": 1}),
        "archived left out"
    );
    // config check names the profile the board's tasks wait for, once.
    let checked = board.kanban(&["config", "check"]).output().unwrap();
    assert!(checked.status.success(), "{checked:?}");
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(said.matches("profile writer (1 ready)").count(), 1, "{said}");
    assert!(
        said.contains("profiles.writer.command") && !said.contains("profile coder"),
        "{said}"
    );
}
