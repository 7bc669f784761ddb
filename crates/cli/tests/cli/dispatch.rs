//! `kanban dispatch`: one dispatcher pass without the gateway, and `--dry-run`, which says
//! what the pass would do and changes nothing.

use crate::common;

use std::time::{Duration, Instant};

use board_core::Status;
use common::{get, Board};
use fake_llm::{FakeLlm, Reply, Settings};

const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");

fn configure(board: &Board, model_url: &str) {
    let worker = format!("{KANBAN} complete --result dispatched");
    let config = format!(
        "model:\n  base_url: {model_url}\n  api_key_env: KANBAN_TEST_NO_KEY\n\
         kanban:\n  max_spawn: 2\n\
         profiles:\n  worker:\n    description: completes at once\n    command: [\"sh\", \"-c\", {worker:?}]\n"
    );
    std::fs::write(board.home().join("config.yaml"), config).expect("config");
}

#[test]
fn a_dry_run_changes_nothing_and_a_pass_does_the_work() {
    let board = Board::init();
    let llm = FakeLlm::start_blocking(Settings::default()).expect("fake llm");
    llm.set_default_reply(Reply::text(
        r#"{"fanout": false, "title": "clear now", "body": "b"}"#,
    ));
    configure(&board, &llm.base_url());
    let first = board.create(&["first", "--assignee", "worker"]);
    let second = board.create(&["second", "--assignee", "worker"]);
    let card = board.create(&["rough", "--triage"]);
    let before = board.snapshot();

    let plan = board.json(&["dispatch", "--dry-run"]);
    assert_eq!(plan["spawned"], serde_json::json!([first, second]));
    assert_eq!(plan["decompositions_started"], serde_json::json!([card]));
    assert_eq!(board.snapshot(), before, "a dry run writes nothing");
    assert!(llm.requests().is_empty(), "a dry run calls no model");

    let report = board.json(&["dispatch"]);
    assert_eq!(report["spawned"], serde_json::json!([first, second]));
    // The pass waits for its decompositions: the card is out of triage when it returns.
    assert_eq!(get(&board, &card).status, Status::Ready);
    assert_eq!(get(&board, &card).title, "clear now");
    let start = Instant::now();
    while [&first, &second]
        .iter()
        .any(|id| get(&board, id).status != Status::Done)
    {
        if start.elapsed() > Duration::from_secs(20) {
            let logs: Vec<String> = [&first, &second]
                .iter()
                .map(|id| {
                    let log = std::fs::read_to_string(board.home().join("logs").join(format!("{id}.log")));
                    format!("{id} {:?}: {log:?}", get(&board, id))
                })
                .collect();
            panic!("the workers never completed:\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(get(&board, &first).result.as_deref(), Some("dispatched"));
}
