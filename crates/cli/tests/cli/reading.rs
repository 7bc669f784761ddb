//! `context`, `stats` and `events --follow`: what a worker reads before it starts, what
//! the board adds up to, and the event stream as it grows.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use board_core::LlmPurpose;
use board_core::{BlockKind, BoardWrites, LlmCall, LlmLedger};
use common::{store, task_id, Board};
use serde_json::{json, Value};

fn as_worker(board: &Board, id: &str, run: &str, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = board.kanban(args);
    cmd.env("KANBAN_TASK", id).env("KANBAN_RUN_ID", run);
    cmd
}

fn stdout_of(mut cmd: assert_cmd::Command) -> String {
    let out = cmd.output().expect("run kanban");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn a_childs_worker_reads_its_parents_result_through_context() {
    let board = Board::init();
    let parent = board.create(&["find the answer"]);
    let child = board.create(&["use the answer", "--parent", &parent, "--body", "print it"]);
    let run = board.ok(&["claim", &parent]).trim().to_owned();
    as_worker(
        &board,
        &parent,
        &run,
        &[
            "complete",
            "--result",
            "the answer is 42",
            "--summary",
            "asked the oracle",
        ],
    )
    .assert()
    .success();

    let run = board.ok(&["claim", &child]).trim().to_owned();
    let brief = stdout_of(as_worker(&board, &child, &run, &["context"]));
    assert!(brief.starts_with("# use the answer\n"), "{brief}");
    assert!(brief.contains("print it"), "{brief}");
    assert!(
        brief.contains(&format!("### find the answer (`{parent}`, done)")),
        "{brief}"
    );
    assert!(brief.contains("the answer is 42"), "{brief}");
    assert!(brief.contains("Summary: asked the oracle"), "{brief}");

    let brief: Value = serde_json::from_str(&stdout_of(as_worker(
        &board,
        &child,
        &run,
        &["context", "--json"],
    )))
    .expect("json");
    assert_eq!(brief["task"]["id"], json!(child));
    assert_eq!(
        brief["parents"],
        json!([{
            "id": parent,
            "title": "find the answer",
            "status": "done",
            "result": "the answer is 42",
            "summary": "asked the oracle",
        }])
    );
    assert_eq!(brief["truncated"], false);
    let keys: Vec<&str> = brief
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "task",
            "files",
            "more_files",
            "review",
            "parents",
            "attempts",
            "comments",
            "truncated"
        ]
    );
    assert_eq!(
        brief["review"],
        serde_json::Value::Null,
        "a worker's brief, not a reviewer's"
    );
}

#[test]
fn context_shows_earlier_attempts_and_comments() {
    let board = Board::init();
    let id = board.create(&["flaky work"]);
    board.ok(&["claim", &id]);
    board.ok(&["block", &id, "no network", "--kind", "transient"]);
    board.ok(&["unblock", &id]);
    board.ok(&["claim", &id]);
    board.ok(&["comment", &id, "try the mirror", "--author", "ann"]);
    let brief = board.json(&["context", &id]);
    let attempts = brief["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "the open run is not an earlier attempt");
    assert_eq!(attempts[0]["outcome"], "blocked");
    assert_eq!(attempts[0]["error"], "no network");
    assert_eq!(brief["comments"][0]["body"], "try the mirror");
    assert_eq!(brief["task"]["current_run_id"], 2);
    let text = board.ok(&["context", &id]);
    assert!(text.contains("- Run 1: blocked"), "{text}");
    assert!(text.contains("  - Error: no network"), "{text}");
    assert!(text.contains("- ann, "), "{text}");
}

#[test]
fn context_stays_under_16_kib_keeping_the_newest() {
    let board = Board::init();
    let id = board.create(&["a long story", "--body", &"b".repeat(50_000)]);
    let s = store(&board);
    let tid = task_id(&id);
    for round in 0..6 {
        let claim = s.claim(&tid, 60, 1_000 + round * 10).expect("claim");
        let reason = format!("attempt {round}: {}", "e".repeat(3_000));
        // Kinds alternate: the same kind twice in a row would send the card to triage.
        let kind = [BlockKind::Transient, BlockKind::NeedsInput][round as usize % 2];
        s.block(
            &tid,
            Some(kind),
            Some(reason),
            Some(claim.run_id),
            1_001 + round * 10,
        )
        .expect("block");
        s.unblock(&tid, None, 1_002 + round * 10).expect("unblock");
    }
    for n in 0..30 {
        let body = format!("comment {n}: {}", "c".repeat(1_200));
        s.comment(&tid, Some("ann"), &body, None, 2_000 + n)
            .expect("comment");
    }

    let text = board.ok(&["context", &id]);
    assert!(text.len() <= 16 * 1024, "{} bytes", text.len());
    assert!(text.contains("comment 29: "), "the newest comment stays");
    assert!(!text.contains("comment 0: "), "the oldest comment goes");
    assert!(text.contains("more characters]"), "long fields say they were cut");
    assert!(text.contains("_Cut to fit 16 KiB; left out: "), "{text}");

    let brief = board.json(&["context", &id]);
    assert_eq!(brief["truncated"], true);
    let comments = brief["comments"].as_array().expect("comments");
    let last = comments.last().expect("a comment");
    assert!(last["body"].as_str().expect("body").starts_with("comment 29: "));
    let body = brief["task"]["body"].as_str().expect("body");
    assert!(
        body.len() < 50_000 && body.ends_with("more characters]"),
        "{}",
        body.len()
    );
}

#[test]
fn context_without_an_id_outside_a_worker_is_a_usage_error() {
    let board = Board::init();
    let out = board.kanban(&["context"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("kanban: context needs a task id"), "{stderr}");
}

#[test]
fn stats_counts_tasks_assignees_and_llm_calls() {
    let board = Board::init();
    let a = board.create(&["a", "--assignee", "coder"]);
    board.create(&["b", "--assignee", "coder"]);
    board.create(&["c", "--triage"]);
    let d = board.create(&["d", "--assignee", "writer"]);
    board.ok(&["claim", &a]);
    board.ok(&["complete", &d]);
    let s = store(&board);
    let now = board_home::now();
    // The last row is two days old: all time counts it, the last 24 h do not.
    for (outcome, prompt, completion, started_at) in [
        ("ok", Some(100), Some(20), now),
        ("ok", Some(50), Some(5), now - 10),
        ("http_error", None, None, now - 2 * 86_400),
    ] {
        s.record_llm_call(&LlmCall {
            purpose: LlmPurpose::Decompose,
            model: "m".into(),
            outcome: outcome.parse().expect("an outcome"),
            started_at,
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..LlmCall::default()
        })
        .expect("record");
    }

    let stats = board.json(&["stats"]);
    assert_eq!(stats["tasks"]["total"], 4);
    assert_eq!(
        stats["tasks"]["by_status"],
        json!({"triage": 1, "todo": 0, "ready": 1, "running": 1, "verifying": 0, "review": 0, "blocked": 0, "scheduled": 0, "done": 1, "archived": 0})
    );
    let assignees: Vec<(Value, Value)> = stats["tasks"]["by_assignee"]
        .as_array()
        .expect("array")
        .iter()
        .map(|a| (a["assignee"].clone(), a["total"].clone()))
        .collect();
    assert_eq!(
        assignees,
        [
            (json!("coder"), json!(2)),
            (json!("writer"), json!(1)),
            (json!(null), json!(1))
        ]
    );
    assert!(stats["oldest_ready"]["age_seconds"].as_i64().expect("age") >= 0);
    assert_eq!(
        stats["llm"]["all_time"],
        json!({"requests": 3, "by_outcome": {"http_error": 1, "ok": 2}, "prompt_tokens": 150,
               "completion_tokens": 25, "cost": null, "over_budget": 0})
    );
    assert_eq!(stats["llm"]["last_24h"]["requests"], 2);
    assert_eq!(stats["llm"]["breaker"]["state"], "closed");
    assert_eq!(stats["llm"]["ceilings"]["reached"], json!(null));
    let keys: Vec<&str> = stats
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["tasks", "oldest_ready", "llm", "checks", "lanes"]);
    assert_eq!(
        stats["checks"],
        json!({"verify_failed": 0, "changes_requested": 0})
    );

    let text = board.ok(&["stats"]);
    assert!(text.contains("llm requests  3 (1 http_error, 2 ok)"), "{text}");
    assert!(text.contains("llm tokens    150 prompt, 25 completion"), "{text}");
    assert!(
        text.contains("last 24 h     2 (2 ok); 150 prompt, 25 completion"),
        "{text}"
    );
    assert!(text.contains("ceilings      none"), "{text}");
}

/// `kanban ARGS...` as a child process whose stdout lines arrive on a channel.
pub(crate) fn spawn_lines(board: &Board, args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kanban"))
        .arg("--home")
        .arg(board.home())
        .args(args)
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kanban");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Comments on `id` until the `watch` whose lines arrive on `rx` shows one: it prints only
/// what happens after it has started, so a test's writes wait for that.
pub(crate) fn await_watching(board: &Board, rx: &Receiver<String>, id: &str) {
    let started = std::time::Instant::now();
    loop {
        board.ok(&["comment", id, "are you watching?"]);
        if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "kanban watch printed nothing"
        );
    }
}

/// The lines arriving on `rx` up to and with the first that contains `last`.
pub(crate) fn lines_until(rx: &Receiver<String>, last: &str) -> Vec<String> {
    let mut lines = Vec::new();
    while !lines.last().is_some_and(|line: &String| line.contains(last)) {
        lines.push(next_line(rx, last));
    }
    lines
}

pub(crate) fn next_line(rx: &Receiver<String>, what: &str) -> String {
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("no line for {what}: {e}"))
}

/// Sends `signal` and waits (with a deadline) for the follower to exit; returns its code.
pub(crate) fn stop(mut child: Child, signal: i32) -> Option<i32> {
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: kill has no memory preconditions; the pid is our own live child.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut stderr).expect("stderr");
            }
            assert!(stderr.is_empty(), "stderr: {stderr}");
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the follower did not stop on signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn events_follow_streams_new_events_until_sigint() {
    let board = Board::init();
    let first = board.create(&["first"]);
    let existing = board.json(&["events"]).as_array().expect("array").len();
    let (child, rx) = spawn_lines(&board, &["events", "--follow", "--json"]);
    for n in 0..existing {
        let line: Value = serde_json::from_str(&next_line(&rx, "an existing event")).expect("json");
        assert_eq!(line["task_id"], json!(first), "event {n}");
    }
    // Appended by other processes while the follower runs.
    let second = board.create(&["second"]);
    board.ok(&["claim", &second]);
    let created: Value = serde_json::from_str(&next_line(&rx, "created")).expect("json");
    let claimed: Value = serde_json::from_str(&next_line(&rx, "claimed")).expect("json");
    assert_eq!(
        (&created["kind"], &created["task_id"]),
        (&json!("created"), &json!(second))
    );
    assert_eq!(
        (&claimed["kind"], &claimed["run_id"]),
        (&json!("claimed"), &json!(1))
    );
    assert!(claimed["id"].as_i64() > created["id"].as_i64());
    assert_eq!(stop(child, libc::SIGINT), Some(0));
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_err(),
        "nothing after the stop"
    );
}

/// A follower of one task (`args` after the task's id) shows its events and no other
/// task's, and stops cleanly on `signal`.
fn follows_one_task(args: &[&str], signal: i32) {
    let board = Board::init();
    let watched = board.create(&["watched"]);
    let mut all = vec![args[0], watched.as_str()];
    all.extend_from_slice(&args[1..]);
    let (child, rx) = spawn_lines(&board, &all);
    let line = next_line(&rx, "created");
    assert!(line.contains("created") && !line.contains(&watched), "{line}");
    board.create(&["another task"]);
    board.ok(&["comment", &watched, "hello"]);
    let line = next_line(&rx, "commented");
    assert!(
        line.contains("commented"),
        "only the watched task's events: {line}"
    );
    assert_eq!(stop(child, signal), Some(0));
}

#[test]
fn events_follow_of_one_task_stops_on_sigterm() {
    follows_one_task(&["events", "--follow"], libc::SIGTERM);
}

/// `events --follow --interval S` reads the board every S seconds: with 60 a new event
/// is not printed within a second, where the default 0.2 s would print it. Without
/// `--follow` the flag is refused.
#[test]
fn events_follow_reads_the_board_at_its_interval() {
    follows_one_task(&["events", "--follow", "--interval", "0.05"], libc::SIGTERM);
    let board = Board::init();
    let id = board.create(&["slow"]);
    let (mut child, rx) = spawn_lines(&board, &["events", &id, "--follow", "--interval", "60"]);
    next_line(&rx, "created");
    board.ok(&["comment", &id, "hello"]);
    let early = rx.recv_timeout(Duration::from_secs(1));
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert!(early.is_err(), "read before its interval: {early:?}");
    let bad = board.kanban(&["events", "--interval", "0.05"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

#[test]
fn tail_follows_one_tasks_events_as_hermes_tail_does() {
    follows_one_task(&["tail", "--interval", "0.05"], libc::SIGINT);
    let board = Board::init();
    let id = board.create(&["x"]);
    let bad = board.kanban(&["tail", &id, "--interval", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

/// A read verb on a home that does not exist says so and creates nothing.
#[test]
fn a_read_on_a_missing_home_creates_no_board() {
    let board = Board::new();
    let home = board.home();
    for args in [
        &["list"][..],
        &["show", "t_00000001"],
        &["runs", "t_00000001"],
        &["events"],
        &["stats"],
        &["--json", "list"],
    ] {
        let out = board.kanban(args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "kanban: no board at {} (kanban init creates one; --home or KANBAN_HOME names another)\n",
                home.display()
            ),
            "{args:?}"
        );
        assert!(!home.exists(), "{args:?} created the home");
    }
    // A relative home is named as the absolute path it means.
    let dir = tempfile::tempdir().expect("dir");
    let out = common::bare()
        .current_dir(dir.path())
        .args(["--home", "rel", "list"])
        .output()
        .expect("run");
    let absolute = std::fs::canonicalize(dir.path()).expect("dir").join("rel");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "kanban: no board at {} (kanban init creates one; --home or KANBAN_HOME names another)\n",
            absolute.display()
        )
    );
}

#[test]
fn events_kind_takes_a_list_and_names_a_kind_the_board_never_records() {
    let board = Board::init();
    let id = board.create(&["listed", "--assignee", "default"]);
    board.ok(&["claim", &id]);
    board.ok(&["complete", &id, "--result", "ok"]);
    let kinds = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["events", "--all"];
        all.extend_from_slice(args);
        let shown = board.json(&all);
        shown
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kinds(&["--kind", "created,completed"]), ["created", "completed"]);
    assert_eq!(
        kinds(&["--kind", "created", "--kind", "completed"]),
        ["created", "completed"]
    );
    assert_eq!(kinds(&["--kind", "claimed"]), ["claimed"]);
    let out = board.kanban(&["events", "--kind", "complete"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kanban records no event of kind complete") && stderr.contains("completed"),
        "{stderr}"
    );
}

#[test]
fn list_into_a_pipe_never_cuts_a_title() {
    let board = Board::init();
    let title = format!("find me in a pipe {}", "with many words ".repeat(10));
    let title = title.trim_end();
    board.create(&[
        title,
        "--assignee",
        "a-profile-name-longer-than-thirty-two-columns",
    ]);
    let out = board.kanban(&["list"]).env_remove("COLUMNS").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(title), "{text}");
    assert!(
        text.contains("a-profile-name-longer-than-thirty-two-columns"),
        "{text}"
    );
    assert!(!text.contains('…'), "{text}");
}

#[test]
fn reads_refuse_a_home_without_a_board_and_make_none() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("kanbn");
    for verb in [
        &["list"][..],
        &["stats"],
        &["events"],
        &["gateway", "status"],
        &["dispatch", "--dry-run"],
        &["gc", "--dry-run"],
        &["lane", "list"],
        &["context", "t_1a2b3c4d"],
        &["mcp"],
    ] {
        let out = common::bare()
            .arg("--home")
            .arg(&typo)
            .args(verb)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{verb:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no board at") && stderr.lines().count() == 1,
            "{verb:?}: {stderr}"
        );
        assert!(!typo.exists(), "{verb:?} made a home");
    }
}

#[test]
fn a_board_in_a_read_only_directory_serves_every_read() {
    use std::os::unix::fs::PermissionsExt;
    if !common::root_for("read a board as a user who cannot write it") {
        return;
    }
    let board = Board::init();
    let id = board.create(&["read me where I cannot be written", "--assignee", "default"]);
    let home = board.home();
    let as_reader = |args: &[&str]| {
        let mut cmd = common::unprivileged(&home);
        // The reader's own HOME (systemd units are looked for there), not root's.
        cmd.env("HOME", &home);
        cmd.arg("--home").arg(&home).args(args).output().unwrap()
    };
    std::fs::set_permissions(home.join("kanban.db"), std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o555)).unwrap();
    for verb in [
        &["list"][..],
        &["show", id.as_str()],
        &["runs", id.as_str()],
        &["events"],
        &["stats"],
        &["gateway", "status"],
        &["lane", "list"],
        &["dispatch", "--dry-run"],
        &["gc", "--dry-run"],
    ] {
        let out = as_reader(verb);
        assert!(out.status.success(), "{verb:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("read as a snapshot"), "{verb:?}: {stderr}");
    }
    let listed = as_reader(&["list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("read me where I cannot be written"));
    let write = as_reader(&["create", "not here"]);
    assert_eq!(write.status.code(), Some(1), "a write is refused: {write:?}");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn log_prints_a_workers_log_blanked_and_never_through_a_link() {
    let board = Board::init();
    let id = board.create(&["logged"]);
    let missing = board.kanban(&["log", &id]).output().unwrap();
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no log for"));
    let logs = board.home().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join(format!("{id}.log"));
    std::fs::write(&log, b"first line\n\x1b]0;title\x07second \xff line\nlast").unwrap();
    let shown = board.ok(&["log", &id]);
    assert_eq!(shown, "first line\n ]0;title second \u{fffd} line\nlast\n");
    assert_eq!(board.ok(&["log", &id, "--tail", "6"]), "last\n");
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(board.home().join("config.yaml"), &log).unwrap();
    let linked = board.kanban(&["log", &id]).output().unwrap();
    assert_eq!(linked.status.code(), Some(1), "{linked:?}");
    assert!(linked.stdout.is_empty(), "nothing of the link's target");
}
