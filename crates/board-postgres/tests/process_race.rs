//! A reclaim and a completion of the same run racing from two separate processes on one
//! board schema: exactly one wins, every round.
//!
//! The racers are this test binary itself, re-run with `--ignored --exact race_child`;
//! each opens its own store once and then races round after round. A round is a real
//! barrier: the parent sends the task to both, waits until both print READY, then
//! writes GO to both (in alternating order, so neither side always starts first).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use board_core::{
    BoardReads, BoardStats, BoardWrites, Completion, NewTask, NoWorkers, ReclaimOutcome, Status, TaskId,
};
use board_postgres::PgStore;
use common::TestSchema;

const ROUNDS: usize = 150;
/// Each side must win at least this often, or the race was not a race.
const MIN_WINS: usize = 5;
const ROLE: &str = "KANBAN_RACE_ROLE";
const SCHEMA: &str = "KANBAN_RACE_SCHEMA";
/// The longest the parent waits for a line from a racer.
const LINE_WAIT: Duration = Duration::from_secs(60);

#[test]
#[ignore = "a racer process, started by reclaim_and_complete_race_between_processes"]
fn race_child() {
    let Ok(role) = std::env::var(ROLE) else {
        panic!("run only as a racer: {ROLE} is not set");
    };
    let options = board_postgres::Options {
        schema: Some(std::env::var(SCHEMA).expect("the schema to race in")),
        ..Default::default()
    };
    let store = PgStore::open(&common::url(), &options).expect("racer opens the board");
    let mut lines = std::io::stdin().lock().lines();
    while let Some(Ok(line)) = lines.next() {
        let Some(round) = line.strip_prefix("ROUND ") else {
            break;
        };
        let (task, run) = round.split_once(' ').expect("ROUND <task> <run>");
        let (task, run): (TaskId, i64) = (task.parse().unwrap(), run.parse().unwrap());
        say("READY");
        match lines.next() {
            Some(Ok(go)) if go == "GO" => {}
            other => panic!("expected GO, got {other:?}"),
        }
        let won = race(&store, &role, &task, run);
        say(if won { "WON" } else { "LOST" });
    }
}

fn race(store: &PgStore, role: &str, task: &TaskId, run: i64) -> bool {
    match role {
        "reclaim" => {
            store.reclaim(task, Some(run), None, &NoWorkers, 2).unwrap() == ReclaimOutcome::Reclaimed
        }
        "complete" => {
            // The reclaimer reads the task before it writes; so does the completer, so
            // that neither side has a head start and both outcomes occur.
            store.get(task).unwrap();
            let guarded = Completion {
                expected_run_id: Some(run),
                ..Completion::default()
            };
            store.complete(task, &guarded, 2).unwrap()
        }
        other => panic!("unknown role {other}"),
    }
}

/// A protocol line, marked so that the test harness's own output cannot be mistaken
/// for it.
fn say(word: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "RACER:{word}").unwrap();
    out.flush().unwrap();
}

/// A racer process, killed if the test ends early.
struct Racer {
    child: Child,
    stdin: ChildStdin,
    said: Receiver<String>,
}

impl Racer {
    fn start(role: &str, schema: &str) -> Racer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "race_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(ROLE, role)
            .env(SCHEMA, schema)
            .env("KANBAN_TEST_DATABASE_URL", common::url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn racer");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, said) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if let Some((_, word)) = line.split_once("RACER:") {
                    if send.send(word.trim().to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        Racer { child, stdin, said }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .expect("write to racer");
    }

    fn expect(&self, words: &[&str]) -> String {
        match self.said.recv_timeout(LINE_WAIT) {
            Ok(word) if words.contains(&word.as_str()) => word,
            Ok(word) => panic!("racer said {word:?}, expected one of {words:?}"),
            Err(e) => panic!("racer said nothing within {LINE_WAIT:?} ({e})"),
        }
    }

    /// Ends the racer: EOF on its stdin, then a bounded wait for it to exit.
    fn finish(mut self) {
        self.send("EXIT");
        let deadline = Instant::now() + LINE_WAIT;
        loop {
            match self.child.try_wait().expect("racer status") {
                Some(status) => {
                    assert!(status.success(), "racer failed: {status}");
                    return;
                }
                None if Instant::now() > deadline => panic!("racer did not exit within {LINE_WAIT:?}"),
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

impl Drop for Racer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn reclaim_and_complete_race_between_processes() {
    let started = Instant::now();
    let schema = TestSchema::new();
    let store = schema.open();
    let mut racers = [
        Racer::start("reclaim", &schema.name),
        Racer::start("complete", &schema.name),
    ];
    let (mut reclaim_wins, mut completion_wins) = (0, 0);
    for round in 0..ROUNDS {
        let t = store
            .create(&NewTask::titled(format!("race {round}")), 1)
            .unwrap();
        let claim = store.claim(&t.id, 900, 1).unwrap();
        for racer in &mut racers {
            racer.send(&format!("ROUND {} {}", t.id, claim.run_id));
        }
        for racer in &racers {
            racer.expect(&["READY"]);
        }
        let first = round % 2;
        racers[first].send("GO");
        racers[1 - first].send("GO");
        let [reclaimed, completed] = [&racers[0], &racers[1]].map(|r| r.expect(&["WON", "LOST"]) == "WON");
        assert!(
            reclaimed ^ completed,
            "round {round}: reclaimed={reclaimed} completed={completed}"
        );
        let task = store.get(&t.id).unwrap();
        assert_eq!(task.status, if completed { Status::Done } else { Status::Ready });
        assert_eq!(task.lease, None);
        let runs = store.runs(&t.id).unwrap();
        assert_eq!(runs.len(), 1);
        assert!(!runs[0].is_open());
        reclaim_wins += usize::from(reclaimed);
        completion_wins += usize::from(completed);
    }
    for racer in racers {
        racer.finish();
    }
    board_core::check_invariants(&store.snapshot().unwrap()).unwrap();
    eprintln!(
        "{ROUNDS} rounds in {:.1?}: completion won {completion_wins}, reclaim won {reclaim_wins}",
        started.elapsed()
    );
    assert!(
        reclaim_wins >= MIN_WINS && completion_wins >= MIN_WINS,
        "both sides must win sometimes: reclaim {reclaim_wins}, completion {completion_wins}"
    );
}
