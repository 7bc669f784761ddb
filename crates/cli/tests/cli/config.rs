//! `kanban config check` and the verbs' use of the config: the effective values, warnings
//! on stderr, a broken config refused in one line by every verb that opens the board, the
//! API key never printed, and `claim`/`heartbeat` leases from `kanban.claim_ttl_seconds`.

use crate::common;

use board_home::config::Config;
use common::{get, Board};
use serde_json::Value;

const CANARY: &str = "sk-canary-4c1d9e2b";

fn write_config(board: &Board, text: &[u8]) {
    std::fs::create_dir_all(board.home()).expect("home");
    std::fs::write(board.home().join("config.yaml"), text).expect("write config");
}

fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn check_on_a_new_home_prints_every_default_and_creates_nothing() {
    let board = Board::new();
    let out = board.kanban(&["config", "check"]).output().expect("run");
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.starts_with("# effective configuration of "), "{text}");
    assert!(text.contains("(no file: every default)"), "{text}");
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(body, Config::default().effective_yaml());
    assert!(!board.home().exists(), "config check must not create the home");

    let json = board.json(&["config", "check"]);
    assert_eq!(json, Config::default().effective_json());
    assert!(!board.home().exists());
}

#[test]
fn the_template_init_writes_is_exactly_the_defaults() {
    let board = Board::init();
    let written = std::fs::read_to_string(board.home().join("config.yaml")).expect("template");
    assert!(written.starts_with("# kanban configuration."));
    // `ok` also proves stderr is empty: the template has no unknown key.
    let json = board.json(&["config", "check"]);
    assert_eq!(json, Config::default().effective_json());
    let human = board.ok(&["config", "check"]);
    assert!(!human.contains("no file"), "{human}");
}

#[test]
fn check_shows_overrides() {
    let board = Board::new();
    write_config(
        &board,
        b"kanban:\n  claim_ttl_seconds: 120\n  dispatch_interval_seconds: 0.5\nprofiles:\n  coder: {command: [coder, \"{task_id}\"]}\n",
    );
    let json = board.json(&["config", "check"]);
    assert_eq!(json["kanban"]["claim_ttl_seconds"], 120);
    assert_eq!(json["kanban"]["dispatch_interval_seconds"], 0.5);
    assert_eq!(
        json["profiles"]["coder"]["command"],
        serde_json::json!(["coder", "{task_id}"])
    );
    assert_eq!(
        json["profiles"]["default"]["description"],
        "General-purpose worker"
    );
}

#[test]
fn unknown_keys_are_warnings_on_stderr_and_the_check_passes() {
    let board = Board::new();
    write_config(&board, b"kanban:\n  max_spwn: 8\nmodle: {}\n");
    let out = board
        .kanban(&["config", "check", "--json"])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "kanban: warning: config.yaml: unknown key kanban.max_spwn (ignored)\n\
         kanban: warning: config.yaml: unknown key modle (ignored)\n"
    );
    assert_eq!(stdout_json(&out), Config::default().effective_json());
}

#[test]
fn an_invalid_config_is_one_line_and_exit_1() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"kanban:\n  max_spawn: four\n",
            "kanban: config.yaml: kanban.max_spawn: expected a non-negative integer, got \"four\"\n",
        ),
        (
            b"kanban: {decompose_max_children: 500}\n",
            "kanban: config.yaml: kanban.decompose_max_children: 500 is above the ceiling 64\n",
        ),
        (
            b"profiles:\n  coder:\n    command: []\n",
            "kanban: config.yaml: profiles.coder.command: must not be empty\n",
        ),
        (
            b"kanban:\n  max_spawn: [1\n",
            "kanban: config.yaml: YAML syntax error at line 3, column 1: while parsing a flow sequence, expected ',' or ']'\n",
        ),
        (
            b"kanban: {default_assignee: \xff}\n",
            "kanban: config.yaml: not valid UTF-8 (line 1)\n",
        ),
    ];
    for (text, expected) in cases {
        let board = Board::new();
        write_config(&board, text);
        for json in [false, true] {
            let mut args = vec!["config", "check"];
            if json {
                args.push("--json");
            }
            let out = board.kanban(&args).output().expect("run");
            assert_eq!(
                out.status.code(),
                Some(1),
                "{args:?} on {:?}",
                String::from_utf8_lossy(text)
            );
            assert!(out.stdout.is_empty());
            assert_eq!(String::from_utf8_lossy(&out.stderr), *expected);
        }
    }
}

#[test]
fn a_config_that_is_a_directory_is_refused() {
    let board = Board::new();
    std::fs::create_dir_all(board.home().join("config.yaml")).expect("mkdir");
    let out = board.kanban(&["config", "check"]).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with("config.yaml: the config is a directory, not a file\n"),
        "{stderr}"
    );
}

#[test]
fn a_broken_config_stops_every_verb_that_opens_the_board() {
    let board = Board::new();
    write_config(&board, b"kanban: {claim_ttl_seconds: 0}\n");
    for args in [
        &["ls"][..],
        &["init"],
        &["create", "a task"],
        &["claim", "t_00000000"],
        &["heartbeat", "t_00000000"],
    ] {
        let out = board.kanban(args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "kanban: config.yaml: kanban.claim_ttl_seconds: expected a positive integer, got 0\n",
            "{args:?}"
        );
    }
    assert!(!board.db().exists(), "a refused config leaves the home untouched");
}

#[test]
fn the_api_key_is_never_printed() {
    let board = Board::new();
    write_config(&board, format!("model: {{api_key: {CANARY}}}\n").as_bytes());
    for args in [&["config", "check"][..], &["config", "check", "--json"]] {
        let out = board.kanban(args).output().expect("run");
        assert!(out.status.success());
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains(CANARY), "leaked: {all}");
        assert!(all.contains("[redacted]"), "{all}");
    }

    // From the variable named by model.api_key_env.
    let board = Board::new();
    write_config(&board, b"model: {api_key_env: MY_TEST_KEY}\n");
    let out = board
        .kanban(&["config", "check", "--json"])
        .env("MY_TEST_KEY", CANARY)
        .output()
        .expect("run");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
    assert_eq!(stdout_json(&out)["model"]["api_key"], "[redacted]");
    let out = board
        .kanban(&["config", "check", "--json"])
        .env_remove("MY_TEST_KEY")
        .output()
        .expect("run");
    assert_eq!(stdout_json(&out)["model"]["api_key"], Value::Null);
}

#[test]
fn claim_and_heartbeat_lease_for_claim_ttl_seconds() {
    let board = Board::init();
    write_config(&board, b"kanban:\n  claim_ttl_seconds: 120\n");
    let id = board.create(&["leased"]);
    board.ok(&["claim", &id]);
    let task = get(&board, &id);
    let (Some(lease), Some(claimed)) = (task.lease.clone(), task.started_at) else {
        panic!("claimed task without a lease: {task:?}");
    };
    assert_eq!(lease.expires - claimed, 120);

    board.ok(&["heartbeat", &id]);
    let task = get(&board, &id);
    let lease = task.lease.expect("lease");
    let beat = lease.last_heartbeat_at.expect("heartbeat time");
    assert_eq!(lease.expires - beat, 120);

    // --ttl still wins.
    let other = board.create(&["explicit"]);
    board.ok(&["claim", &other, "--ttl", "3600"]);
    let task = get(&board, &other);
    assert_eq!(
        task.lease
            .map(|l| l.expires)
            .zip(task.started_at)
            .map(|(e, s)| e - s),
        Some(3600)
    );
}

/// Hermes' own forms of "the default" work for every verb; its other settings are named
/// once by `config check`.
#[test]
fn a_hermes_config_is_used_as_it_is() {
    let board = Board::init();
    write_config(
        &board,
        b"model: ''\nkanban:\n  orchestrator_profile: ''\n  default_assignee: ''\n  dispatch_in_gateway: true\nagent:\n  max_turns: 90\n",
    );
    board.ok(&["list"]);
    let out = board.kanban(&["config", "check"]).output().expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "kanban: warning: config.yaml: Hermes settings not used by kanban (ignored): kanban.dispatch_in_gateway, agent\n"
    );
    board.create(&["first"]);
    let json = stdout_json(
        &board
            .kanban(&["--json", "config", "check"])
            .output()
            .expect("run"),
    );
    assert_eq!(json["kanban"]["default_assignee"], "default");
    assert_eq!(json["kanban"]["orchestrator_profile"], "default");

    write_config(&board, b"model: qwen2.5\n");
    // The task waits for `default`, which has no command: said once, on stderr.
    let out = board
        .kanban(&["--json", "config", "check"])
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("1 task(s) of profile default (1 ready)"), "{said}");
    let json = stdout_json(&out);
    assert_eq!(json["model"]["default"], "qwen2.5");
}
