//! `kanban gc`: its dry run removes nothing and counts what the sweep then removes, on
//! SQLite and PostgreSQL; a task a live task links to stays; the board passes every
//! check after; the ages come from the flags or the config, and nothing goes without one.

use assert_cmd::Command;
use board_core::{Completion, Freed, NewTask, Store, TaskId};
use board_postgres::{Options, PgStore};
use serde_json::Value;

use crate::common::{store, Board, KANBAN};
use crate::gateway_board::check_board;

const DAY: i64 = 86_400;

/// What the seeded board holds, by the fate gc has in store for it.
struct Seeded {
    removed: Vec<TaskId>,
    kept: Vec<TaskId>,
    expected: Freed,
}

/// Old archived tasks (one alone with a run and a comment, two linked), an old archived
/// parent of a live child, a task archived yesterday, a done task with old heartbeats,
/// and a fresh task.
fn seed(s: &dyn Store) -> Seeded {
    let now = board_home::now();
    let old = now - 100 * DAY;
    let create = |title: &str, parents: Vec<TaskId>| {
        let request = NewTask {
            parents,
            ..NewTask::titled(title)
        };
        s.create(&request, old).unwrap().id
    };
    let lone = create("lone", vec![]);
    s.claim(&lone, 900, old).unwrap();
    assert!(s.complete(&lone, &Completion::default(), old + 5).unwrap());
    s.comment(&lone, Some("ana"), "noted", None, old + 6).unwrap();
    s.archive(&lone, old + 7).unwrap();
    let first = create("first of a pair", vec![]);
    let second = create("second of a pair", vec![first.clone()]);
    s.archive(&first, old + 8).unwrap();
    s.archive(&second, old + 8).unwrap();
    let parent = create("archived parent", vec![]);
    let child = create("live child", vec![parent.clone()]);
    s.archive(&parent, old + 9).unwrap();
    let recent = create("archived yesterday", vec![]);
    s.archive(&recent, now - DAY).unwrap();
    let worked = create("worked", vec![]);
    let claim = s.claim(&worked, 900, old).unwrap();
    for i in 0..10 {
        assert!(s
            .heartbeat(&worked, claim.run_id, 900, None, old + 1 + i)
            .unwrap());
    }
    assert!(s.complete(&worked, &Completion::default(), old + 20).unwrap());
    let fresh = s.create(&NewTask::titled("fresh"), now).unwrap().id;
    let count = |ids: &[&TaskId]| -> u64 {
        ids.iter()
            .map(|id| {
                let filter = board_core::EventFilter {
                    task_id: Some((*id).clone()),
                    ..Default::default()
                };
                s.count_events(&filter).unwrap()
            })
            .sum()
    };
    let expected = Freed {
        tasks: 3,
        runs: 1,
        events: count(&[&lone, &first, &second]) + 10,
        comments: 1,
        links: 1,
    };
    Seeded {
        removed: vec![lone, first, second],
        kept: vec![parent, child, recent, worked, fresh],
        expected,
    }
}

fn freed_of(report: &Value) -> Freed {
    serde_json::from_value::<serde_json::Map<String, Value>>(report["freed"].clone())
        .map(|m| Freed {
            tasks: m["tasks"].as_u64().unwrap(),
            runs: m["runs"].as_u64().unwrap(),
            events: m["events"].as_u64().unwrap(),
            comments: m["comments"].as_u64().unwrap(),
            links: m["links"].as_u64().unwrap(),
        })
        .unwrap()
}

/// Runs `gc` dry and then for real against `s`'s board, checking both.
fn dry_run_then_sweep(s: &dyn Store, seeded: &Seeded, mut gc: impl FnMut(&[&str]) -> Value) -> Value {
    let before = s.snapshot().unwrap();
    let ages = ["--archived-older-than", "30d", "--events-older-than", "30d"];
    let mut dry = vec!["gc", "--json", "--dry-run"];
    dry.extend(ages);
    let dry = gc(&dry);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(freed_of(&dry), seeded.expected);
    assert_eq!(s.snapshot().unwrap(), before, "a dry run removes nothing");
    let mut real = vec!["gc", "--json"];
    real.extend(ages);
    let report = gc(&real);
    assert_eq!(freed_of(&report), seeded.expected, "what the dry run counted");
    for id in &seeded.removed {
        assert!(s.get(id).is_err(), "{id} removed");
    }
    for id in &seeded.kept {
        s.get(id).unwrap();
    }
    let after = s.snapshot().unwrap();
    check_board(&after).unwrap();
    let again = gc(&real);
    assert_eq!(freed_of(&again), Freed::default());
    report
}

fn json_of(cmd: &mut Command) -> Value {
    let out = cmd.output().expect("run kanban");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn gc_on_sqlite_removes_what_its_dry_run_counted_and_keeps_linked_tasks() {
    let board = Board::init();
    let s = store(&board);
    let seeded = seed(&s);
    let unasked = board.ok(&["gc"]);
    assert!(unasked.starts_with("nothing to remove"), "{unasked}");
    let report = dry_run_then_sweep(&s, &seeded, |args| json_of(&mut board.kanban(args)));
    assert_eq!(report["compacted"]["action"], "wal_checkpoint(TRUNCATE)");
    let human = board.ok(&["gc", "--archived-older-than", "12h"]);
    assert!(
        human.starts_with("removed 1 task, 0 runs, 2 events, 0 comments, 0 links\n"),
        "{human}"
    );
}

#[test]
fn gc_takes_its_ages_from_the_config() {
    let board = Board::init();
    let s = store(&board);
    let seeded = seed(&s);
    std::fs::write(
        board.home().join("config.yaml"),
        "kanban:\n  gc_archived_older_than: 30d\n  gc_events_older_than: 2592000\n",
    )
    .unwrap();
    let report = board.json(&["gc", "--dry-run"]);
    assert_eq!(freed_of(&report), seeded.expected);
    assert_eq!(report["archived_older_than_seconds"], 30 * DAY);
    assert_eq!(report["events_older_than_seconds"], 30 * DAY);
    std::fs::write(
        board.home().join("config.yaml"),
        "kanban:\n  gc_events_older_than: soon\n",
    )
    .unwrap();
    let bad = board.kanban(&["gc"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("gc_events_older_than"));
}

#[test]
fn gc_on_postgres_removes_what_its_dry_run_counted() {
    let base = std::env::var("KANBAN_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).unwrap();
    let schema = format!(
        "kanban_gc_{}_{:08x}",
        std::process::id(),
        u32::from_le_bytes(random)
    );
    let options = Options {
        schema: Some(schema.clone()),
        ..Options::default()
    };
    let pg = PgStore::open(&base, &options).expect("PostgreSQL at KANBAN_TEST_DATABASE_URL");
    let joiner = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{joiner}options=-csearch_path%3D{schema}");
    let seeded = seed(&pg);
    let home = tempfile::tempdir().unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let report = dry_run_then_sweep(&pg, &seeded, |args| {
            let mut cmd = Command::new(KANBAN);
            cmd.arg("--home")
                .arg(home.path().join("home"))
                .args(args)
                .env_remove("KANBAN_HOME")
                .env("KANBAN_DATABASE_URL", &url);
            json_of(&mut cmd)
        });
        assert_eq!(report["compacted"]["action"], "ANALYZE");
    }));
    if let Ok(mut admin) = postgres::Client::connect(&base, postgres::NoTls) {
        let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
