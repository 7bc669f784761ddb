//! Each verb this CLI shares with Hermes' prints Hermes' line: a table of commands run in
//! lockstep on a board of hermes-agent's own `hermes kanban` (the pinned test
//! virtualenv's) and on one of ours, each row compared by its exit code and its stdout,
//! with task ids written `ID`. Where the two differ by design, the row says why and
//! compares the exit code only.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::{venv_python, Board};

/// One command of the table: its arguments (`{A}` and `{B}` the tasks made by the rows
/// before it), and why its stdout differs from Hermes', if it does.
struct Row {
    args: &'static [&'static str],
    differs: Option<&'static str>,
}

const fn same(args: &'static [&'static str]) -> Row {
    Row { args, differs: None }
}

const TABLE: &[Row] = &[
    same(&["create", "alpha", "--assignee", "coder"]),
    same(&["create", "beta", "--assignee", "coder", "--priority", "2"]),
    same(&["assign", "{A}", "writer"]),
    same(&["assign", "{A}", "none"]),
    same(&["reassign", "{A}", "coder"]),
    same(&["link", "{A}", "{B}"]),
    same(&["unlink", "{A}", "{B}"]),
    same(&["unlink", "{A}", "{B}"]),
    same(&["comment", "{A}", "looks", "good"]),
    same(&["block", "{A}", "waiting", "for", "the", "key"]),
    same(&["unblock", "{A}"]),
    same(&["schedule", "{A}", "after", "the", "freeze"]),
    same(&["unblock", "{A}"]),
    Row {
        args: &["claim", "{B}"],
        differs: Some("kanban claim prints the run id alone, for scripts: run=$(kanban claim ID)"),
    },
    same(&["heartbeat", "{B}"]),
    same(&["reclaim", "{B}"]),
    same(&["complete", "{B}", "--result", "shipped"]),
    same(&["edit", "{B}", "--result", "shipped, and documented"]),
    same(&["promote", "{A}", "by", "hand"]),
    same(&["archive", "{A}"]),
    Row {
        args: &["list"],
        differs: Some("kanban list is a table with a header, ages and creation times, never cut when piped"),
    },
    Row {
        args: &["show", "{B}"],
        differs: Some("kanban show lays out its facts on one line and its sections under headings"),
    },
    same(&["assign", "t_0000dead", "coder"]),
    same(&["unblock", "t_0000dead"]),
];

/// hermes-agent's `hermes kanban ARGS` on a Hermes home of its own (kept away from the
/// user's `~/.hermes`), with the exit code its verb returns (`hermes/kanban_cli.py`).
fn hermes(home: &Path, args: &[String]) -> (Option<i32>, String) {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/hermes/kanban_cli.py");
    let out = Command::new(venv_python())
        .arg(driver)
        .args(args)
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .env_remove("HERMES_PROFILE")
        .output()
        .expect("hermes-agent's CLI runs (cargo xtask venv installs it)");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn ours(board: &Board, args: &[String]) -> (Option<i32>, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, _) = board.outcome(&args, &[("KANBAN_PROFILE", "")]);
    (code, out)
}

/// The row's arguments with this side's ids.
fn filled(row: &Row, ids: &BTreeMap<&str, String>) -> Vec<String> {
    row.args
        .iter()
        .map(|a| match *a {
            "{A}" | "{B}" => ids[&a[1..2]].clone(),
            other => other.to_owned(),
        })
        .collect()
}

/// Stdout with every task id (`t_` and eight hex digits) written `ID`.
fn ids_out(out: &str) -> String {
    let mut text = out.trim_end().to_owned();
    while let Some(at) = text.match_indices("t_").map(|(at, _)| at).find(|&at| {
        let hex = text.get(at + 2..at + 10);
        hex.is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    }) {
        text.replace_range(at..at + 10, "ID");
    }
    text
}

#[test]
fn every_shared_verb_prints_hermes_line_and_exit_code() {
    let hermes_home = tempfile::tempdir().unwrap();
    let board = Board::init();
    let (code, _) = hermes(hermes_home.path(), &["init".to_owned()]);
    assert_eq!(code, Some(0), "hermes kanban init");
    let (mut theirs_ids, mut our_ids) = (BTreeMap::new(), BTreeMap::new());
    let mut made = ["A", "B"].into_iter();
    for row in TABLE {
        let (their_code, their_out) = hermes(hermes_home.path(), &filled(row, &theirs_ids));
        let (our_code, our_out) = ours(&board, &filled(row, &our_ids));
        assert_eq!(
            our_code, their_code,
            "{:?}: ours {our_out:?}, Hermes' {their_out:?}",
            row.args
        );
        if row.differs.is_none() {
            assert_eq!(ids_out(&our_out), ids_out(&their_out), "{:?}", row.args);
        }
        if row.args[0] == "create" {
            let name = made.next().unwrap();
            let id = |out: &str| out.split_whitespace().nth(1).unwrap().to_owned();
            theirs_ids.insert(name, id(&their_out));
            our_ids.insert(name, id(&our_out));
        }
    }
}
