//! The model endpoint seen from the command line: credentials in `base_url` never appear
//! in any output or in the ledger, and plain HTTP to another machine is a config error
//! unless `model.allow_insecure_http` says otherwise.

use crate::common;

use common::Board;
use fake_llm::{FakeLlm, Reply, Settings};

const SECRETS: [&str; 3] = ["alice-user", "pa55word-secret", "query-secret-value"];

fn write_config(board: &Board, model: &str) {
    std::fs::write(board.home().join("config.yaml"), format!("model:\n{model}")).expect("write config");
}

/// Every `error` the ledger holds, read straight from the file.
fn ledger_errors(board: &Board) -> String {
    let conn = rusqlite::Connection::open(board.db()).expect("open db");
    let mut stmt = conn
        .prepare("SELECT COALESCE(error, '') FROM llm_calls")
        .expect("prepare");
    let errors: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(!errors.is_empty(), "no llm_calls row");
    errors.join("\n")
}

#[test]
fn base_url_credentials_never_appear_in_any_output() {
    let board = Board::init();
    let llm = FakeLlm::start_blocking(Settings::default()).expect("fake llm");
    let base = llm
        .base_url()
        .replace("http://", "http://alice-user:pa55word-secret@");
    let base = format!("{base}?api_key=query-secret-value");
    write_config(
        &board,
        &format!("  base_url: \"{base}\"\n  api_key_env: KANBAN_TEST_NO_KEY\n"),
    );
    let id = board.create(&["rough idea", "--triage"]);
    llm.push_reply(Reply::error(401, format!("unauthorized: {base}")));

    let mut shown = String::new();
    let decompose = board.kanban(&["decompose", &id]).output().unwrap();
    assert!(!decompose.status.success());
    for args in [
        vec!["config", "check"],
        vec!["config", "check", "--json"],
        vec!["show", id.as_str()],
        vec!["show", id.as_str(), "--json"],
        vec!["events", "--json"],
        vec!["stats", "--json"],
    ] {
        let out = board.kanban(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        shown.push_str(&String::from_utf8_lossy(&out.stdout));
        shown.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    shown.push_str(&String::from_utf8_lossy(&decompose.stdout));
    shown.push_str(&String::from_utf8_lossy(&decompose.stderr));
    shown.push_str(&ledger_errors(&board));

    assert!(shown.contains("HTTP 401"), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
    for secret in SECRETS {
        assert!(!shown.contains(secret), "{secret} shown in:\n{shown}");
    }
    assert_eq!(llm.requests().len(), 1, "one request, one ledger row");
}

#[test]
fn plain_http_to_another_machine_is_refused_unless_allowed() {
    let board = Board::init();
    write_config(&board, "  base_url: http://api.example.com/v1\n");
    let out = board.kanban(&["list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("model.base_url"), "{stderr}");
    assert!(stderr.contains("model.allow_insecure_http: true"), "{stderr}");

    write_config(
        &board,
        "  base_url: http://api.example.com/v1\n  allow_insecure_http: true\n",
    );
    board.ok(&["list"]);
    write_config(&board, "  base_url: http://localhost:11434/v1\n");
    board.ok(&["list"]);
}
