//! A task row the board could never have written (inserted by hand with sqlite) is
//! reported once by its id and skipped: `list` and the dispatcher go on with the rest,
//! and `show` of that id says plainly what is wrong.

use crate::common;

use std::time::{Duration, Instant};

use board_core::Status;
use common::{get, Board};
use serde_json::Value;

const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");
const BAD_ID: &str = "not-an-id";
const BAD_STATUS_ID: &str = "t_0badbeef";

/// A board with two good ready tasks for a worker that completes at once, and two rows
/// planted by hand ahead of them in the claim order.
fn board_with_bad_rows() -> (Board, [String; 2]) {
    let board = Board::init();
    let worker = format!("{KANBAN} complete --result dispatched");
    std::fs::write(
        board.home().join("config.yaml"),
        format!(
            "kanban:\n  max_spawn: 4\nprofiles:\n  worker:\n    description: completes\n    command: [\"sh\", \"-c\", {worker:?}]\n"
        ),
    )
    .unwrap();
    let good = [
        board.create(&["first", "--assignee", "worker"]),
        board.create(&["second", "--assignee", "worker"]),
    ];
    let conn = rusqlite::Connection::open(board.db()).unwrap();
    conn.execute_batch(&format!(
        "INSERT INTO tasks (id, title, status, priority, assignee, created_at, updated_at)
         VALUES ('{BAD_ID}', 'planted', 'ready', 9, 'worker', 0, 0);
         INSERT INTO tasks (id, title, status, priority, assignee, created_at, updated_at)
         VALUES ('{BAD_STATUS_ID}', 'planted', 'bogus', 9, 'worker', 0, 0);"
    ))
    .unwrap();
    (board, good)
}

/// Runs a command that must succeed; returns stdout and the lines of stderr.
fn run(board: &Board, args: &[&str]) -> (String, Vec<String>) {
    let out = board.kanban(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (
        String::from_utf8(out.stdout).unwrap(),
        stderr.lines().map(str::to_owned).collect(),
    )
}

/// One warning per bad row, naming it.
fn assert_warned_once_each(stderr: &[String]) {
    assert_eq!(stderr.len(), 2, "{stderr:?}");
    for (line, id) in stderr.iter().zip([BAD_ID, BAD_STATUS_ID]) {
        assert!(line.starts_with("kanban: warning: task row"), "{line}");
        assert!(line.contains(&format!("\"{id}\"")), "{line}");
    }
}

#[test]
fn list_skips_a_bad_row_with_one_warning_and_shows_the_rest() {
    let (board, good) = board_with_bad_rows();

    let (stdout, stderr) = run(&board, &["list", "--json"]);
    let ids: Vec<String> = serde_json::from_str::<Value>(&stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, good);
    assert_warned_once_each(&stderr);

    let (stdout, stderr) = run(&board, &["list"]);
    assert!(good.iter().all(|id| stdout.contains(id.as_str())), "{stdout}");
    assert_warned_once_each(&stderr);

    let show = board.kanban(&["show", BAD_ID]).output().unwrap();
    assert_eq!(show.status.code(), Some(2));
    let message = String::from_utf8_lossy(&show.stderr);
    assert_eq!(message.lines().count(), 1, "{message}");
    let show = board.kanban(&["show", BAD_STATUS_ID]).output().unwrap();
    assert_eq!(show.status.code(), Some(1));
    let message = String::from_utf8_lossy(&show.stderr);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.contains(&format!("task {BAD_STATUS_ID} cannot be read")),
        "{message}"
    );
}

#[test]
fn dispatch_skips_a_bad_row_and_spawns_the_others() {
    let (board, good) = board_with_bad_rows();

    let (stdout, stderr) = run(&board, &["dispatch", "--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["spawned"], serde_json::json!(good), "{report}");
    assert_eq!(
        stderr.iter().filter(|l| l.contains(BAD_ID)).count(),
        1,
        "reported once however often the pass reads it: {stderr:?}"
    );

    let start = Instant::now();
    while good.iter().any(|id| get(&board, id).status != Status::Done) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "workers did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
