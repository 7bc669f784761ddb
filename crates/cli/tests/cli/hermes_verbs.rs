//! The Hermes verbs and flags that move cards by hand or read them as Hermes does:
//! `promote` (`--ids`, `--force`, `--dry-run`), `reopen`, `block --ids`, `edit --result`,
//! `watch`, `show`'s block reason and latest summary, `list --sort` in Hermes' orders,
//! `dispatch --failure-limit` and `man`. Each test reads the board after the command.

use crate::common;
use crate::reading::{await_watching, lines_until, spawn_lines, stop};

use board_core::Status;
use common::{get, Board};

/// `kanban ARGS`: its exit code, stdout and stderr.
fn run(board: &Board, args: &[&str]) -> (Option<i32>, String, String) {
    board.outcome(args, &[])
}

/// A config whose profile `broken` has a command that cannot start, with `extra` first.
fn broken_profile(board: &Board, extra: &str) {
    let text = format!("{extra}profiles:\n  broken:\n    command: [\"/nonexistent/worker\"]\n");
    std::fs::write(board.home().join("config.yaml"), text).unwrap();
}

#[test]
fn promote_moves_todo_and_blocked_tasks_to_ready_as_hermes_does() {
    let board = Board::init();
    let parent = board.create(&["parent"]);
    let child = board.create(&["child", "--parent", &parent]);
    let blocked = board.create(&["blocked"]);
    board.ok(&["block", &blocked, "waiting"]);

    // A parent still open: refused on stderr, exit 1, nothing changed.
    let before = board.snapshot();
    let (code, out, err) = run(&board, &["promote", &child, "looks", "fine"]);
    assert_eq!(code, Some(1));
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "kanban: cannot promote {child}: 1 parent(s) not done or archived (use --force to override)\n"
        )
    );
    assert_eq!(board.snapshot(), before);

    // A dry run says what it would do, and does nothing.
    let (code, out, _) = run(
        &board,
        &["promote", &blocked, "--dry-run", "--ids", &child, "--force"],
    );
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        format!("Would promote {blocked} -> ready (dry)\nWould promote {child} -> ready (dry)\n")
    );
    assert_eq!(board.snapshot(), before);

    // Bulk, with a reason, one task refused: the others are promoted, exit 1.
    let (code, out, err) = run(
        &board,
        &[
            "promote",
            &blocked,
            "unblocked",
            "upstream",
            "--ids",
            &child,
            &parent,
        ],
    );
    assert_eq!(code, Some(1));
    assert_eq!(out, format!("Promoted {blocked} -> ready: unblocked upstream\n"));
    assert!(err.contains(&format!("cannot promote {child}")), "{err}");
    assert!(
        err.contains(&format!("cannot promote {parent}: task {parent} is ready")),
        "{err}"
    );
    assert_eq!(get(&board, &blocked).status, Status::Ready);
    let event = board.json(&["events", &blocked, "--kind", "promoted"]);
    assert_eq!(event[0]["payload"]["reason"], "unblocked upstream");
    assert_eq!(event[0]["payload"]["from"], "blocked");

    // --force: the child stops waiting for its open parent (the link goes).
    let shown = board.json(&["promote", &child, "--force"]);
    assert_eq!(shown["promoted"], true);
    assert_eq!(shown["forced"], true);
    assert_eq!(get(&board, &child).status, Status::Ready);
    assert!(board.json(&["show", &child])["parents"]
        .as_array()
        .unwrap()
        .is_empty());
    let unlinked = board.json(&["events", &child, "--kind", "unlinked"]);
    assert_eq!(unlinked.as_array().unwrap().len(), 1, "{unlinked}");

    // A single id answers one JSON object; several an array.
    let (code, one, _) = run(&board, &["--json", "promote", &parent]);
    assert_eq!(code, Some(1));
    let one: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(
        (one["task_id"].as_str(), one["promoted"].as_bool()),
        (Some(parent.as_str()), Some(false))
    );
    assert!(one["error"].as_str().unwrap().contains("is ready"), "{one}");
    let many = run(&board, &["--json", "promote", &parent, "--ids", &child]);
    let many: serde_json::Value = serde_json::from_str(&many.1).unwrap();
    assert_eq!(many.as_array().map(Vec::len), Some(2));
}

#[test]
fn reopen_takes_done_work_back_and_holds_its_children() {
    let board = Board::init();
    let parent = board.create(&["parent"]);
    let child = board.create(&["child", "--parent", &parent]);
    board.ok(&["complete", &parent, "--result", "first try"]);
    assert_eq!(get(&board, &child).status, Status::Ready);
    assert_eq!(
        board.ok(&["reopen", &parent, "--reason", "the fix was wrong"]),
        format!("Reopened {parent} -> ready\n")
    );
    let task = get(&board, &parent);
    assert_eq!((task.status, task.completed_at), (Status::Ready, None));
    assert_eq!(
        get(&board, &child).status,
        Status::Todo,
        "the child waits for its parent again"
    );
    let event = board.json(&["events", &parent, "--kind", "reopened"]);
    assert_eq!(event[0]["payload"]["reason"], "the fix was wrong");

    // A running child refuses its parent's reopen; nothing changes.
    board.ok(&["complete", &parent]);
    board.ok(&["claim", &child]);
    let before = board.snapshot();
    let (code, _, err) = run(&board, &["reopen", &parent]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&format!("its child {child} is running")), "{err}");
    assert_eq!(board.snapshot(), before);

    // Only done or archived tasks reopen.
    let (code, _, err) = run(&board, &["reopen", &child]);
    assert_eq!(code, Some(1));
    assert!(err.contains("reopen needs done or archived"), "{err}");
}

#[test]
fn block_ids_blocks_each_task_with_one_reason() {
    let board = Board::init();
    let ids: Vec<String> = (0..3).map(|i| board.create(&[&format!("t{i}")])).collect();
    let out = board.ok(&[
        "block", &ids[0], "the", "API", "is", "down", "--ids", &ids[1], &ids[2],
    ]);
    assert_eq!(out.lines().count(), 3, "{out}");
    for id in &ids {
        assert_eq!(get(&board, id).status, Status::Blocked);
        let blocked = board.json(&["events", id, "--kind", "blocked"]);
        assert_eq!(blocked[0]["payload"]["reason"], "the API is down");
    }
    // `show` says why it is blocked.
    let shown = board.ok(&["show", &ids[1]]);
    assert!(shown.contains("Blocked because\n  the API is down\n"), "{shown}");
    assert_eq!(board.json(&["show", &ids[1]])["block_reason"], "the API is down");
    // One already blocked: refused, the others blocked, exit 1.
    let fresh = board.create(&["fresh"]);
    let (code, _, err) = run(&board, &["block", &fresh, "--ids", &ids[0]]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&ids[0]), "{err}");
    assert_eq!(get(&board, &fresh).status, Status::Blocked);
}

#[test]
fn edit_result_fills_in_what_a_done_task_handed_on() {
    let board = Board::init();
    let id = board.create(&["ship it"]);
    let (code, _, err) = run(&board, &["edit", &id, "--result", "merged"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("edit --result needs done"), "{err}");
    board.ok(&["claim", &id]);
    board.ok(&["complete", &id, "--summary", "did it"]);
    assert_eq!(board.json(&["show", &id])["latest_summary"], "did it");
    assert!(board.ok(&["show", &id]).contains("Latest summary\n  did it\n"));
    board.ok(&[
        "edit",
        &id,
        "--result",
        "merged as #412",
        "--metadata",
        r#"{"pr": 412}"#,
    ]);
    let shown = board.json(&["show", &id]);
    assert_eq!(shown["task"]["result"], "merged as #412");
    let run = shown["runs"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&run["summary"], &run["metadata"]["pr"]),
        (&"merged as #412".into(), &412.into())
    );
    // --summary without --result, or with --title, is a usage error.
    assert_eq!(run_code(&board, &["edit", &id, "--summary", "x"]), Some(2));
    assert_eq!(
        run_code(&board, &["edit", &id, "--result", "x", "--title", "y"]),
        Some(2)
    );
}

fn run_code(board: &Board, args: &[&str]) -> Option<i32> {
    run(board, args).0
}

#[test]
fn watch_follows_new_events_of_one_assignee_and_kinds() {
    let board = Board::init();
    let mine = board.create(&["mine", "--assignee", "coder"]);
    let theirs = board.create(&["theirs", "--assignee", "writer"]);
    let (child, rx) = spawn_lines(
        &board,
        &[
            "watch",
            "--assignee",
            "coder",
            "--kinds",
            "commented,blocked",
            "--interval",
            "0.05",
        ],
    );
    // History is not replayed; another assignee's and other kinds' events are left out.
    await_watching(&board, &rx, &mine);
    board.ok(&["comment", &theirs, "not for coder"]);
    board.ok(&["edit", &mine, "--priority", "3"]);
    board.ok(&["block", &mine, "stuck"]);
    // Up to the block, only comments on `mine` left from the wait.
    for line in lines_until(&rx, "blocked") {
        assert!(line.contains(&mine) && !line.contains(&theirs), "{line}");
        assert!(line.contains("commented") || line.contains("blocked"), "{line}");
    }
    assert_eq!(stop(child, libc::SIGINT), Some(0));
    assert_eq!(run_code(&board, &["watch", "--interval", "0"]), Some(2));
}

#[test]
fn list_sorts_in_hermes_orders() {
    let board = Board::init();
    let low = board.create(&["low", "--priority", "-1", "--assignee", "zed"]);
    let high = board.create(&["high", "--priority", "5", "--assignee", "amy"]);
    let mid = board.create(&["mid", "--priority", "2", "--assignee", "none"]);
    let order = |sort: &str| -> Vec<String> {
        let listed = board.json(&["list", "--sort", sort]);
        let ids = listed.as_array().unwrap().iter();
        ids.map(|t| t["id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(order("priority-desc"), [low.clone(), mid.clone(), high.clone()]);
    assert_eq!(order("assignee"), [mid, high, low]);
}

#[test]
fn dispatch_failure_limit_gives_up_at_that_many_failures() {
    let board = Board::init();
    broken_profile(&board, "");
    let id = board.create(&["never starts", "--assignee", "broken"]);
    let (code, _, err) = run(&board, &["dispatch", "--failure-limit", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let task = get(&board, &id);
    assert_eq!(task.status, Status::Blocked, "given up after one failed spawn");
    assert_eq!(
        board
            .json(&["events", &id, "--kind", "gave_up"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(run_code(&board, &["dispatch", "--failure-limit", "0"]), Some(2));
}

#[test]
fn man_prints_the_manual_and_writes_a_page_per_verb() {
    let out = common::bare().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.contains(".TH kanban 1") && page.contains("promote"),
        "{}",
        &page[..200]
    );
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = common::bare()
        .args(["man", "--out"])
        .arg(&pages)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for verb in [
        "kanban.1",
        "kanban-promote.1",
        "kanban-watch.1",
        "kanban-gateway-run.1",
    ] {
        assert!(pages.join(verb).is_file(), "{verb}");
    }
}

#[test]
fn diagnostics_names_what_is_wrong_with_its_fix() {
    let board = Board::init();
    broken_profile(&board, "agent: {}\nkanban:\n  failure_limit: 1\n");
    let config = board.home().join("config.yaml");
    let first = run(&board, &["diagnostics"]).1;
    assert!(
        first.starts_with("1 active diagnostic(s) across 0 task(s) and the board:"),
        "{first}"
    );
    let stranded = board.create(&["for a Hermes profile", "--assignee", "hermes-writer"]);
    let broken = board.create(&["never starts", "--assignee", "broken"]);
    let (code, _, _) = run(&board, &["dispatch"]);
    assert_eq!(code, Some(0));
    let before = board.snapshot();
    let (code, out, err) = run(&board, &["diagnostics"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert!(
        out.starts_with("4 active diagnostic(s) across 1 task(s) and the board:\n"),
        "{out}"
    );
    for said in [
        "!! [error] gateway_down: 1 ready task(s) and no gateway running on this home",
        "!! [error] stranded_in_ready: profile hermes-writer has no command here: 1 ready task(s) wait for it",
        "→ add profiles.hermes-writer.command to config.yaml",
        "!! [error] repeated_failures: gave up after 1 failed runs in a row",
        &format!("→ kanban log {broken}, then kanban reassign {broken} PROFILE or kanban unblock {broken}"),
        "⚠ [warning] config: config.yaml: Hermes settings not used by kanban (ignored): agent",
    ] {
        assert!(out.contains(said), "missing {said:?} in:\n{out}");
    }
    assert_eq!(board.snapshot(), before, "a read changes nothing");
    let errors = board.json(&["diag", "--severity", "error"]);
    let kinds: Vec<&str> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["diagnostics"][0]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 3, "{errors}");
    assert!(!kinds.contains(&"config"), "{kinds:?}");
    let one = board.json(&["diagnostics", "--task", &broken]);
    assert_eq!(one.as_array().map(Vec::len), Some(1), "{one}");
    assert_eq!(one[0]["task_id"], broken.as_str());
    assert_eq!(
        run_code(&board, &["diagnostics", "--task", "t_00000bad"]),
        Some(1)
    );
    assert_eq!(run_code(&board, &["diagnostics", "--severity", "fatal"]), Some(2));
    // Once fixed, nothing is left.
    board.ok(&["archive", &broken, &stranded]);
    std::fs::write(&config, "profiles:\n  hermes-writer: {external: true}\n").unwrap();
    assert_eq!(
        run(&board, &["diagnostics"]).1,
        "No active diagnostics on this board.\n"
    );
}

#[test]
fn schedule_parks_tasks_waiting_on_time_until_unblocked() {
    let board = Board::init();
    let report = board.create(&["nightly report"]);
    let digest = board.create(&["weekly digest"]);
    let (code, out, _) = run(
        &board,
        &["schedule", &report, "waits", "for", "02:00", "--ids", &digest],
    );
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        format!("Scheduled {report}: waits for 02:00\nScheduled {digest}: waits for 02:00\n")
    );
    let listed = board.json(&["list", "--status", "scheduled"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    let plan = board.json(&["dispatch", "--dry-run"]);
    assert_eq!(
        plan["spawned"],
        serde_json::json!([]),
        "nothing scheduled is spawned"
    );
    let (code, _, err) = run(&board, &["schedule", &report]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with(&format!(
            "kanban: cannot schedule {report}: task {report} is scheduled"
        )),
        "{err}"
    );
    board.ok(&["unblock", &report]);
    assert_eq!(get(&board, &report).status, Status::Ready);
    assert_eq!(get(&board, &digest).status, Status::Scheduled);
}

#[test]
fn create_takes_hermes_initial_status_and_refuses_what_has_no_meaning_here() {
    let board = Board::init();
    let gated = board.create(&["rotate the key", "--initial-status", "blocked"]);
    assert_eq!(get(&board, &gated).status, Status::Blocked);
    let plain = board.create(&[
        "as usual",
        "--initial-status",
        "running",
        "--workspace",
        "scratch",
    ]);
    assert_eq!(get(&board, &plain).status, Status::Ready);
    board.ok(&["unblock", &gated]);
    assert_eq!(get(&board, &gated).status, Status::Ready);
    let before = board.snapshot();
    for (args, said) in [
        (
            &["x", "--workspace", "dir:/srv/repo"][..],
            "--workspace: only scratch here",
        ),
        (
            &["x", "--workspace", "worktree"],
            "--workspace: only scratch here",
        ),
        (
            &["x", "--branch", "wt/t6"],
            "--branch: there are no worktree workspaces here",
        ),
        (
            &["x", "--goal"],
            "--goal: a goal loop is the worker command's own here",
        ),
        (&["x", "--initial-status", "done"], "invalid value 'done'"),
        (
            &["x", "--initial-status", "blocked", "--triage"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        let (code, _, err) = run(&board, &all);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(err.contains(said) && err.lines().count() == 1, "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before, "a refused create writes nothing");
}
