//! Bodies, results and comments over `kanban.max_text_bytes` (1 MiB unless configured)
//! are refused with one line and a non-zero exit, and the board is left as it was.

use crate::common;

use common::Board;

/// Runs a command that must be refused for its size; returns nothing, checks everything.
fn refused(board: &Board, args: &[&str], stdin: Option<Vec<u8>>) {
    let before = board.snapshot();
    let mut cmd = board.kanban(args);
    if let Some(bytes) = stdin {
        cmd.write_stdin(bytes);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:.3?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("kanban.max_text_bytes"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(board.snapshot(), before, "{args:.3?} changed the board");
}

#[test]
fn a_body_over_the_default_mebibyte_is_refused_from_a_file_and_from_stdin() {
    let board = Board::init();
    let big = vec![b'x'; 1024 * 1024 + 1];
    let file = board.dir.path().join("big.md");
    std::fs::write(&file, &big).unwrap();
    refused(
        &board,
        &["create", "huge", "--body-file", file.to_str().unwrap()],
        None,
    );
    refused(&board, &["create", "huge", "--body-file", "-"], Some(big));

    let exact = vec![b'x'; 1024 * 1024];
    std::fs::write(&file, &exact).unwrap();
    let id = board.create(&["just fits", "--body-file", file.to_str().unwrap()]);
    assert_eq!(common::get(&board, &id).body.len(), 1024 * 1024);
}

#[test]
fn body_result_and_comment_follow_the_configured_cap() {
    let board = Board::init();
    std::fs::write(
        board.home().join("config.yaml"),
        "kanban:\n  max_text_bytes: 100\n",
    )
    .unwrap();
    let over = "y".repeat(101);
    let at = "y".repeat(100);
    let id = board.create(&["small", "--body", &at]);
    board.ok(&["claim", &id]);

    refused(&board, &["create", "t", "--body", &over], None);
    refused(&board, &["edit", &id, "--body", &over], None);
    refused(&board, &["comment", &id, &over], None);
    refused(&board, &["complete", &id, "--result", &over], None);

    board.ok(&["comment", &id, &at]);
    board.ok(&["complete", &id, "--result", &at]);
    assert_eq!(common::get(&board, &id).result.as_deref(), Some(at.as_str()));
}
