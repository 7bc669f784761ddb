//! A reclaim and a completion of the same run racing from two separate processes on one
//! board file: exactly one wins, every round.
//!
//! The racers are this test binary itself, re-run with `--ignored --exact race_child`
//! and the race described in environment variables; each opens its own connection,
//! then waits on stdin so both start together.

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use board_core::{Completion, NewTask, NoWorkers, ReclaimOutcome, Status, Store, TaskId};
use board_sqlite::{Options, SqliteStore};

const ROUNDS: usize = 200;
const ROLE: &str = "KANBAN_RACE_ROLE";

#[test]
#[ignore = "a racer process, started by reclaim_and_complete_race_between_processes"]
fn race_child() {
    let Ok(role) = std::env::var(ROLE) else {
        panic!("run only as a racer: {ROLE} is not set");
    };
    let db = std::env::var("KANBAN_RACE_DB").unwrap();
    let task: TaskId = std::env::var("KANBAN_RACE_TASK").unwrap().parse().unwrap();
    let run: i64 = std::env::var("KANBAN_RACE_RUN").unwrap().parse().unwrap();
    let store = SqliteStore::open(&db, &Options::default()).unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    let won = match role.as_str() {
        "reclaim" => {
            store.reclaim(&task, Some(run), None, &NoWorkers, 2).unwrap() == ReclaimOutcome::Reclaimed
        }
        "complete" => {
            let guarded = Completion {
                expected_run_id: Some(run),
                ..Completion::default()
            };
            store.complete(&task, &guarded, 2).unwrap()
        }
        other => panic!("unknown role {other}"),
    };
    println!("RESULT {}", if won { "won" } else { "lost" });
}

fn racer(role: &str, db: &std::path::Path, task: &TaskId, run: i64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "race_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(ROLE, role)
        .env("KANBAN_RACE_DB", db)
        .env("KANBAN_RACE_TASK", task.as_str())
        .env("KANBAN_RACE_RUN", run.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn racer")
}

fn verdict(child: std::process::Child) -> bool {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "racer failed: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, v)| v.trim()))
    {
        Some("won") => true,
        Some("lost") => false,
        _ => panic!("racer printed no result:\n{stdout}"),
    }
}

#[test]
fn reclaim_and_complete_race_between_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kanban.db");
    let store = SqliteStore::open(&db, &Options::default()).unwrap();
    let (mut completed_wins, mut reclaim_wins) = (0, 0);
    for round in 0..ROUNDS {
        let t = store
            .create(&NewTask::titled(format!("race {round}")), 1)
            .unwrap();
        let claim = store.claim(&t.id, 900, 1).unwrap();
        let mut racers = [
            racer("reclaim", &db, &t.id, claim.run_id),
            racer("complete", &db, &t.id, claim.run_id),
        ];
        for r in &mut racers {
            r.stdin.take().unwrap().write_all(b"go\n").unwrap();
        }
        let [reclaimer, completer] = racers;
        let (reclaimed, completed) = (verdict(reclaimer), verdict(completer));
        assert!(
            reclaimed ^ completed,
            "round {round}: reclaimed={reclaimed} completed={completed}"
        );
        let task = store.get(&t.id).unwrap();
        assert_eq!(task.status, if completed { Status::Done } else { Status::Ready });
        assert_eq!(task.current_run_id, None);
        let runs = store.runs(&t.id).unwrap();
        assert_eq!(runs.len(), 1);
        assert!(!runs[0].is_open());
        completed_wins += completed as usize;
        reclaim_wins += reclaimed as usize;
    }
    let snapshot = store.snapshot().unwrap();
    board_core::check_invariants(&snapshot).unwrap();
    eprintln!("{ROUNDS} rounds: completion won {completed_wins}, reclaim won {reclaim_wins}");
}
