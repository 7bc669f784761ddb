//! A reclaim and a completion of the same run racing from two separate processes on one
//! board file: exactly one wins, every round. Over the rounds each side wins, and
//! the racer released second sometimes wins, which shows the two really overlap.
//!
//! The racers are this test binary itself, re-run with `--ignored --exact race_child`
//! and the race described in environment variables. Each opens its own connection,
//! says `READY` on stdout and waits on stdin; only when both are ready does the parent
//! release them, one `go` line each.

mod rerun;

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use board_core::{
    BoardReads, BoardStats, BoardWrites, Completion, NewTask, NoWorkers, ReclaimOutcome, Status, TaskId,
};
use board_sqlite::{Options, SqliteStore};
use rerun::Rerun;

const ROUNDS: usize = 200;
/// The fewest rounds each side must win, so both ways a round can end are exercised
/// every run. The sides are not even: a reclaim reads the task before its write and a
/// completion only writes, so a reclaim loses most close races. How often depends on
/// the machine: on one 2-core machine each side won about 80 rounds of 200, on another
/// the reclaim won 13 to 20.
const MIN_WINS: usize = 3;
/// How long a racer may take to get ready, answer or exit, on a loaded machine.
const RACER_WAIT: Duration = Duration::from_secs(60);
const ROLE: &str = "KANBAN_RACE_ROLE";
const READY: &str = "RACER READY";
const RESULT: &str = "RACER RESULT ";

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
    // Own line: the test harness may have printed part of one already.
    println!("\n{READY}");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    assert_eq!(go.trim(), "go", "the parent releases racers with `go`");
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
    println!("\n{RESULT}{}", if won { "won" } else { "lost" });
}

fn racer(role: &str, db: &std::path::Path, task: &TaskId, run: i64) -> Rerun {
    let env = [
        (ROLE, role.to_owned()),
        ("KANBAN_RACE_DB", db.display().to_string()),
        ("KANBAN_RACE_TASK", task.to_string()),
        ("KANBAN_RACE_RUN", run.to_string()),
    ];
    Rerun::start(format!("the {role} racer"), "race_child", &env)
}

/// Whether the racer won; it must then exit successfully.
fn verdict(racer: &mut Rerun) -> bool {
    let won = match racer.expect(RESULT, RACER_WAIT).as_str() {
        "won" => true,
        "lost" => false,
        other => panic!("a racer printed {other:?}"),
    };
    racer.finish(RACER_WAIT);
    won
}

#[test]
fn reclaim_and_complete_race_between_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kanban.db");
    let store = SqliteStore::open(&db, &Options::default()).unwrap();
    let (mut completed_wins, mut reclaim_wins, mut upsets) = (0, 0, 0);
    let started = Instant::now();
    for round in 0..ROUNDS {
        let t = store
            .create(&NewTask::titled(format!("race {round}")), 1)
            .unwrap();
        let claim = store.claim(&t.id, 900, 1).unwrap();
        let mut reclaimer = racer("reclaim", &db, &t.id, claim.run_id);
        let mut completer = racer("complete", &db, &t.id, claim.run_id);
        reclaimer.expect(READY, RACER_WAIT);
        completer.expect(READY, RACER_WAIT);
        // Who is released first alternates, so neither side is favoured by the order
        // of the two writes.
        let (first, second) = if round % 2 == 0 {
            (&mut reclaimer, &mut completer)
        } else {
            (&mut completer, &mut reclaimer)
        };
        first.send("go");
        second.send("go");
        let (reclaimed, completed) = (verdict(&mut reclaimer), verdict(&mut completer));
        assert!(
            reclaimed ^ completed,
            "round {round}: reclaimed={reclaimed} completed={completed}"
        );
        let task = store.get(&t.id).unwrap();
        assert_eq!(task.status, if completed { Status::Done } else { Status::Ready });
        assert_eq!(task.current_run_id(), None);
        let runs = store.runs(&t.id).unwrap();
        assert_eq!(runs.len(), 1);
        assert!(!runs[0].is_open());
        let first_released_won = if round % 2 == 0 { reclaimed } else { completed };
        upsets += usize::from(!first_released_won);
        completed_wins += completed as usize;
        reclaim_wins += reclaimed as usize;
    }
    let snapshot = store.snapshot().unwrap();
    board_core::check_invariants(&snapshot).unwrap();
    eprintln!(
        "{ROUNDS} rounds in {:?}: completion won {completed_wins}, reclaim won {reclaim_wins}; \
         the racer released second won {upsets} times",
        started.elapsed()
    );
    assert!(
        completed_wins >= MIN_WINS && reclaim_wins >= MIN_WINS,
        "each side must win at least {MIN_WINS} of {ROUNDS} rounds: completion {completed_wins}, reclaim {reclaim_wins}"
    );
    // Released back to back, the second racer can only win when the first has not yet
    // taken the write lock: then the two were running at the same time.
    assert!(upsets > 0, "the racer released first won every round: no overlap");
}
