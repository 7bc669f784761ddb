//! Reads of a board too large to hold: `list` streamed in every form and paged with a
//! cursor, `events` bounded by default, `show` of a task with many events; and a board
//! that commands alone use, which stays one file so that no command reads a growing log.

use std::collections::BTreeMap;

use board_core::{BoardWrites, NewTask, Task};
use serde_json::Value;

use crate::common::{store, Board};

/// Runs `kanban ARGS` that must succeed; returns stdout and stderr.
fn run(board: &Board, args: &[&str]) -> (String, String) {
    let out = board.kanban(args).output().expect("run kanban");
    assert!(
        out.status.success(),
        "kanban {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

fn seeded(tasks: usize) -> (Board, Vec<Task>) {
    let board = Board::init();
    let s = store(&board);
    let now = board_home::now();
    let created = (0..tasks)
        .map(|i| {
            let request = NewTask {
                priority: (i % 3) as i64,
                ..NewTask::titled(format!("task {i}"))
            };
            s.create(&request, now - (i % 7) as i64).expect("create")
        })
        .collect();
    (board, created)
}

/// The streamed `--json` array is laid out exactly as the whole document pretty-printed
/// (what `list --json` printed before it streamed), `--jsonl` holds the same objects,
/// and the human table of more rows than one chunk has one header and every task once.
#[test]
fn list_streams_every_form_as_the_whole_document_would_print() {
    let (board, created) = seeded(1100);
    let (json, _) = run(&board, &["list", "--json"]);
    let parsed: Value = serde_json::from_str(&json).expect("one JSON array");
    assert_eq!(
        json,
        format!("{}\n", serde_json::to_string_pretty(&parsed).unwrap())
    );
    let items = parsed.as_array().expect("an array");
    assert_eq!(items.len(), created.len());
    let (lines, _) = run(&board, &["list", "--jsonl"]);
    let objects: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a line of JSON"))
        .collect();
    assert_eq!(&objects, items);
    let (table, _) = run(&board, &["list"]);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), created.len() + 1, "one header, one line a task");
    assert_eq!(rows.iter().filter(|l| l.starts_with("ID ")).count(), 1);
    for t in &created {
        assert_eq!(
            rows.iter().filter(|l| l.starts_with(t.id.as_str())).count(),
            1,
            "{}",
            t.id
        );
    }
    let empty = Board::init();
    assert_eq!(run(&empty, &["list", "--json"]).0, "[]\n");
    assert_eq!(run(&empty, &["list", "--jsonl"]).0, "");
}

/// Pages of `--limit` followed by `--after` the id the last page named read every task
/// that was there throughout exactly once, while tasks are created between the pages.
#[test]
fn list_pages_cover_every_task_once_while_tasks_are_created() {
    let (board, created) = seeded(230);
    let s = store(&board);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut after: Option<String> = None;
    for page in 0.. {
        let mut args = vec!["list", "--jsonl", "--limit", "40"];
        if let Some(id) = &after {
            args.extend(["--after", id.as_str()]);
        }
        let (out, err) = run(&board, &args);
        for line in out.lines() {
            let task: Value = serde_json::from_str(line).unwrap();
            *seen.entry(task["id"].as_str().unwrap().to_owned()).or_default() += 1;
        }
        let request = NewTask {
            priority: page % 4 - 1,
            ..NewTask::titled(format!("added {page}"))
        };
        s.create(&request, board_home::now()).unwrap();
        match err.trim().strip_prefix("kanban: the next page: --after ") {
            Some(next) => after = Some(next.to_owned()),
            None => {
                assert!(err.is_empty(), "{err}");
                break;
            }
        }
    }
    for t in &created {
        assert_eq!(seen.get(t.id.as_str()), Some(&1), "{} read once", t.id);
    }
    assert!(seen.values().all(|n| *n == 1));
    let unknown = board.kanban(&["list", "--after", "t_00000000"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("t_00000000"));
}

/// A task that ran and sent 150 heartbeats: 152 events.
fn busy_task(board: &Board) -> (Task, i64) {
    let s = store(board);
    let start = board_home::now() - 1000;
    let t = s.create(&NewTask::titled("busy"), start).unwrap();
    let claim = s.claim(&t.id, 3600, start).unwrap();
    for i in 0..150 {
        assert!(s
            .heartbeat(&t.id, claim.run_id, 3600, None, start + 1 + i)
            .unwrap());
    }
    (t, start)
}

fn event_ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn events_show_the_newest_hundred_unless_asked() {
    let board = Board::init();
    let (t, start) = busy_task(&board);
    let all = event_ids(&board.json(&["events", "--all"]));
    assert_eq!(all.len(), 152);
    let newest = event_ids(&board.json(&["events"]));
    assert_eq!(newest, all[52..].to_vec(), "the newest 100, oldest first");
    assert_eq!(
        event_ids(&board.json(&["events", t.id.as_str(), "--limit", "5"])),
        all[147..].to_vec()
    );
    let claimed = board.json(&["events", "--kind", "claimed"]);
    assert_eq!(claimed.as_array().unwrap().len(), 1);
    assert_eq!(claimed[0]["kind"], "claimed");
    let after = all[140].to_string();
    assert_eq!(
        event_ids(&board.json(&["events", "--since", &after])),
        all[141..].to_vec()
    );
    let moment = jiff::Timestamp::from_second(start + 120).unwrap().to_string();
    let since_time = board.json(&["events", "--since", &moment, "--all"]);
    assert!(since_time
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["created_at"].as_i64().unwrap() >= start + 120));
    assert_eq!(
        since_time.as_array().unwrap().len(),
        31,
        "heartbeats 120..150 s after the start"
    );
    let (human, hint) = run(&board, &["events"]);
    assert_eq!(human.lines().count(), 100);
    assert!(hint.contains("the newest 100 shown"), "{hint}");
    let bad = board
        .kanban(&["events", "--since", "yesterday-ish"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a time or event id"));
}

#[test]
fn show_of_a_busy_task_keeps_the_newest_events_and_counts_the_rest() {
    let board = Board::init();
    let (t, _) = busy_task(&board);
    let shown = board.json(&["show", t.id.as_str()]);
    assert_eq!(shown["events"].as_array().unwrap().len(), 20);
    assert_eq!(shown["events_omitted"], 132);
    let human = board.ok(&["show", t.id.as_str()]);
    assert!(human.contains("Events (last 20 of 152)"), "{human}");
}

/// Every command opens the board anew; a write-ahead log left behind would be read whole
/// by the next one, and would never restart, so each command would cost more than the
/// last. The last connection to close folds the log into the file and removes it.
#[test]
fn a_board_only_commands_use_leaves_no_log_behind() {
    let board = Board::init();
    let wal = board.db().with_extension("db-wal");
    for i in 0..40 {
        let id = board.create(&[&format!("task {i}")]);
        board.ok(&["comment", &id, "noted"]);
        assert!(
            !wal.exists(),
            "after {} writes the log is still there ({} bytes)",
            2 * (i + 1),
            std::fs::metadata(&wal).map_or(0, |m| m.len())
        );
    }
    assert_eq!(board.json(&["list"]).as_array().map(Vec::len), Some(40));
}
