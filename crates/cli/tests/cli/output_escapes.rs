//! Text from cards, workers and their logs is untrusted: the human output of `show`,
//! `list`, `stats`, `events` and `runs` carries none of its control characters (an OSC
//! that retitles the terminal, a CSI that clears it, BEL, CR, C1), while `--json` keeps
//! the text exactly.

use crate::common;
use crate::gateway_board;

use board_core::Status;
use common::Board;
use gateway_board::{worker_profile, Setup};

/// An OSC retitle, a screen clear, a carriage return, a C1 CSI and a backspace.
const HOSTILE: &str = "A\x1b]0;pwned\x07B\x1b[2J\rC\u{9b}31mD\x08E";

/// Panics when `text` holds a control character other than a line feed or a tab.
fn assert_neutral(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        .collect();
    assert!(bad.is_empty(), "{what} printed {bad:?}:\n{text}");
}

fn human(board: &Board, args: &[&str]) -> String {
    board.ok(args)
}

#[test]
fn escapes_in_every_text_field_are_neutralised_in_human_output() {
    let board = Board::init();
    let body = format!("line one {HOSTILE}\n\tline two");
    let id = board.create(&[
        &format!("title {HOSTILE}"),
        "--body",
        &body,
        "--assignee",
        &format!("who{HOSTILE}"),
        "--idempotency-key",
        &format!("key{HOSTILE}"),
    ]);
    let other = board.create(&["second"]);
    board.ok(&[
        "comment",
        &id,
        &format!("said {HOSTILE}"),
        "--author",
        &format!("me{HOSTILE}"),
    ]);
    board.ok(&["claim", &other]);
    board.ok(&["block", &other, &format!("reason {HOSTILE}")]);
    board.ok(&["claim", &id]);
    board.ok(&[
        "complete",
        &id,
        "--result",
        &format!("done {HOSTILE}"),
        "--summary",
        &format!("sum {HOSTILE}"),
    ]);

    let third = board.create(&["third"]);
    let assigned = board.ok(&["assign", &third, &format!("to{HOSTILE}")]);
    assert_neutral("assign", &assigned);
    for args in [
        vec!["show", id.as_str()],
        vec!["show", other.as_str()],
        vec!["list"],
        vec!["list", "--assignee", &format!("who{HOSTILE}")],
        vec!["stats"],
        vec!["events"],
        vec!["events", other.as_str()],
        vec!["runs", id.as_str()],
    ] {
        let out = human(&board, &args);
        assert_neutral(&format!("{args:?}"), &out);
    }
    let show = human(&board, &["show", &id]);
    assert!(show.contains("line one A ]0;pwned B [2J C 31mD E"), "{show}");
    assert!(
        show.contains("\tline two"),
        "a body keeps its tabs and lines:\n{show}"
    );

    let json = board.json(&["show", &id]);
    assert_eq!(json["task"]["body"], body.as_str(), "JSON keeps the text exactly");
    assert_eq!(json["comments"][0]["author"], format!("me{HOSTILE}").as_str());
}

#[test]
fn a_worker_log_tail_with_escapes_is_neutralised_in_show() {
    let script = r"printf 'before \033]0;pwned\007\033[2J\r\233after\n'; exit 3";
    let profiles = worker_profile("evil", script);
    let board = gateway_board::GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 1,
        kanban_extra: "  failure_limit: 1\n",
        ..Setup::default()
    });
    let task = board.create(&["escape artist", "--assignee", "evil"]);
    let id = task.to_string();
    let mut board = board;
    board.start_gateway();
    board.wait_for("the worker's failure", || {
        board.task(&task).status == Status::Blocked
    });

    let error = board.task(&task).last_failure_error.unwrap_or_default();
    assert!(
        error.contains('\x1b'),
        "the stored log tail is kept as written: {error:?}"
    );
    for args in [
        vec!["show", id.as_str()],
        vec!["runs", id.as_str()],
        vec!["events"],
    ] {
        let out = board.kanban_ok(&args);
        assert_neutral(&format!("{args:?}"), &out);
    }
    assert!(board.kanban_ok(&["show", &id]).contains("before  ]0;pwned  [2J"));
}
