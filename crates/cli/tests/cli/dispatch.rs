//! `kanban dispatch`: one dispatcher pass without the gateway, and `--dry-run`, which says
//! what the pass would do and changes nothing; a relative `--home` reaches workers whole.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use board_core::Status;
use common::{bare, get, Board};
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
    let said = board.ok(&["dispatch", "--dry-run"]);
    assert!(
        said.contains(&format!("would spawn      {first} {second}"))
            && said.contains("(a dry run: nothing was changed)"),
        "{said}"
    );
    assert!(
        !said.contains("spawned"),
        "a dry run says what it would do: {said}"
    );

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

/// A worker runs in its own workspace, so the home it is handed must be absolute: a
/// relative `--home` given to `dispatch` still lets the worker's `kanban complete` land
/// on the same board.
#[test]
fn a_relative_home_reaches_the_worker_as_an_absolute_one() {
    let board = Board::new();
    let kanban = |args: &[&str]| {
        let out = bare()
            .current_dir(board.dir.path())
            .args(["--home", "home"])
            .args(args)
            .output()
            .expect("run kanban");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    kanban(&["init"]);
    let worker = format!("printf %s \"$KANBAN_HOME\" > seen_home; {KANBAN} complete --result relative");
    let config = format!(
        "kanban:\n  auto_decompose: false\n\
         profiles:\n  worker:\n    command: [\"sh\", \"-c\", {worker:?}]\n"
    );
    std::fs::write(board.home().join("config.yaml"), config).expect("config");
    let id = kanban(&["create", "rel", "--assignee", "worker", "--json"]);
    let id: serde_json::Value = serde_json::from_str(&id).expect("json");
    let id = id["id"].as_str().expect("id").to_owned();
    kanban(&["dispatch"]);
    let start = Instant::now();
    while get(&board, &id).status != Status::Done {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the worker never completed: {:?}",
            get(&board, &id)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(get(&board, &id).result.as_deref(), Some("relative"));
    let seen = std::fs::read_to_string(board.home().join("workspaces").join(&id).join("seen_home"))
        .expect("the worker wrote its home");
    assert_eq!(Path::new(&seen), board.home(), "the worker's KANBAN_HOME");
}
