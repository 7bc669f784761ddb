//! Hermes' per-task fields from the command line: `create --tenant --skill
//! --max-retries`, `list --tenant` (and the tenant beside the assignee), `show`'s
//! facts and `--json`, `watch --tenant`, and what the worker of such a task is told.

use std::time::Duration;

use crate::common::{get, Board, KANBAN};
use crate::gateway_board::wait_until;
use crate::reading::{await_watching, lines_until, spawn_lines, stop};

use board_core::Status;

#[test]
fn create_keeps_tenant_skills_and_retries_and_list_selects_by_tenant() {
    let board = Board::init();
    let made = board.json(&[
        "create",
        "translate the docs",
        "--assignee",
        "coder",
        "--tenant",
        "acme",
        "--skill",
        "translation",
        "--skill",
        "github-code-review",
        "--max-retries",
        "1",
    ]);
    let acme = made["id"].as_str().unwrap().to_owned();
    assert_eq!(made["tenant"], "acme");
    assert_eq!(
        made["skills"],
        serde_json::json!(["translation", "github-code-review"])
    );
    assert_eq!(made["max_retries"], 1);
    let globex = board.create(&["globex work", "--tenant", "globex"]);
    let plain = board.create(&["nobody's"]);

    let listed = board.json(&["list", "--tenant", "acme"]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [acme.as_str()]);
    let table = board.ok(&["list"]);
    let row = |id: &str| table.lines().find(|l| l.contains(id)).unwrap().to_owned();
    assert!(row(&acme).contains("coder [acme]"), "{table}");
    assert!(!row(&plain).contains('['), "{table}");
    assert!(board.ok(&["list", "--tenant", "globex"]).contains(&globex));
    assert!(board.ok(&["list", "--tenant", "initech"]).contains("no tasks"));

    let shown = board.ok(&["show", &acme]);
    assert!(
        shown.contains("tenant acme · skills translation, github-code-review")
            && shown.contains("max retries 1 (its own)"),
        "{shown}"
    );
    assert!(board
        .ok(&["show", &plain])
        .contains("max retries 2 (kanban.failure_limit)"));
    let json = board.json(&["show", &acme]);
    assert_eq!(
        (&json["task"]["tenant"], &json["task"]["max_retries"]),
        (&serde_json::json!("acme"), &serde_json::json!(1))
    );
}

#[test]
fn bad_tenants_skills_and_retries_are_refused_in_one_line_writing_nothing() {
    let board = Board::init();
    let before = board.snapshot();
    for (args, code, said) in [
        (&["--max-retries", "0"][..], 2, "0 is not in 1.."),
        (&["--max-retries", "x"], 2, "invalid digit"),
        (&["--skill", "a,b"], 1, "repeat --skill for several"),
        (&["--skill=-rf"], 1, "a skill is one name"),
        (&["--tenant", "a\u{1b}[2Jb"], 1, "the tenant is a name"),
        (&["--tenant", " "], 1, "the tenant is a name"),
    ] {
        let mut all = vec!["create", "refused"];
        all.extend_from_slice(args);
        let (got, _, err) = board.outcome(&all, &[]);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains('\u{1b}'), "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before, "a refused create writes nothing");
}

#[test]
fn watch_tenant_follows_only_that_tenants_tasks() {
    let board = Board::init();
    let acme = board.create(&["acme's", "--tenant", "acme"]);
    let other = board.create(&["globex's", "--tenant", "globex"]);
    let (child, rx) = spawn_lines(&board, &["watch", "--tenant", "acme", "--interval", "0.05"]);
    await_watching(&board, &rx, &acme);
    board.ok(&["comment", &other, "not for acme"]);
    board.ok(&["assign", &acme, "bob"]);
    // Every line up to acme's assignment is acme's (comments left from the wait, then
    // the assignment): globex's comment, made before it, is never among them.
    for line in lines_until(&rx, "assigned") {
        assert!(line.contains(&acme) && !line.contains(&other), "{line}");
        assert!(line.contains("commented") || line.contains("assigned"), "{line}");
    }
    let events = board.json(&["events", "--tenant", "globex"]);
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["task_id"] == other.as_str()),
        "{events}"
    );
    assert_eq!(stop(child, libc::SIGINT), Some(0));
}

#[test]
fn the_worker_reads_its_tasks_tenant_and_skills_and_never_the_gateways() {
    let board = Board::init();
    let report = format!(
        "[\"sh\", \"-c\", \"{KANBAN} complete --result \\\"$KANBAN_TENANT|$HERMES_TENANT|$KANBAN_SKILLS\\\"\"]"
    );
    board.ok(&["config", "set", "profiles.coder.command", &report]);
    board.ok(&["config", "set", "profiles.coder.env_allow", "[\"HERMES_TENANT\"]"]);
    let tenanted = board.create(&[
        "tenanted",
        "--assignee",
        "coder",
        "--tenant",
        "acme",
        "--skill",
        "a",
        "--skill",
        "b.c",
    ]);
    let plain = board.create(&["plain", "--assignee", "coder"]);
    // The gateway's own HERMES_TENANT never reaches a worker, even one allowed it.
    let (code, _, err) = board.outcome(&["dispatch"], &[("HERMES_TENANT", "gateways")]);
    assert_eq!(code, Some(0), "{err}");
    for id in [&tenanted, &plain] {
        wait_until("the worker's report", Duration::from_secs(20), || {
            get(&board, id).status == Status::Done
        });
    }
    assert_eq!(get(&board, &tenanted).result.as_deref(), Some("acme|acme|a,b.c"));
    assert_eq!(get(&board, &plain).result.as_deref(), Some("||"));
}

#[test]
fn an_unassigned_task_the_gateway_runs_is_assigned_to_the_default_for_every_view() {
    let board = Board::init();
    let done = format!("[\"sh\", \"-c\", \"{KANBAN} complete --result ok\"]");
    board.ok(&["config", "set", "profiles.coder.command", &done]);
    board.ok(&["config", "set", "kanban.default_assignee", "coder"]);
    let lone = board.create(&["nobody's", "--assignee", "none"]);
    assert!(board.ok(&["list", "--assignee", "none"]).contains(&lone));
    let (code, _, err) = board.outcome(&["dispatch"], &[]);
    assert_eq!(code, Some(0), "{err}");
    wait_until("the worker's report", Duration::from_secs(20), || {
        get(&board, &lone).status == Status::Done
    });
    // The run was coder's, and the task says so: `list --assignee coder` shows it.
    assert_eq!(get(&board, &lone).assignee.as_deref(), Some("coder"));
    let listed = board.ok(&["list", "--assignee", "coder", "--archived"]);
    assert!(listed.contains(&lone), "{listed}");
    let assigned = board.json(&["events", &lone, "--kind", "assigned"]);
    assert_eq!(assigned[0]["payload"]["source"], "kanban.default_assignee");
}
