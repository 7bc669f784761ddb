//! Processes that start together on a home with no board yet, or with a board of an
//! older schema, all succeed: whichever makes or migrates the board first, the others
//! wait for it and then use the board it made. Each round starts a gateway and several
//! `kanban` commands at the same instant (a barrier releases their spawns together) on a
//! fresh home, and every one of them must come up: no `database is locked`, no config
//! read half written, no board refused as not ours while it is being made.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::gateway_board::{kanban_at, wait_until};

const ROUNDS: usize = 20;
/// Commands racing the gateway in each round.
const COMMANDS: usize = 4;

fn command(home: &Path, args: &[&str]) -> Command {
    let mut cmd = kanban_at(home, args);
    cmd.stdin(Stdio::null());
    cmd
}

/// A gateway whose output goes to files beside the home, started when `go` releases it.
fn gateway(home: &Path, logs: &Path, go: &Barrier) -> Child {
    let file = |name: &str| std::fs::File::create(logs.join(name)).unwrap();
    let mut cmd = command(home, &["gateway", "run"]);
    cmd.stdout(file("gateway.stdout")).stderr(file("gateway.stderr"));
    go.wait();
    cmd.spawn().unwrap()
}

/// One round: a gateway, `COMMANDS` `kanban create`s and a `kanban init` start at once
/// on `home`; every command succeeds, the gateway ticks, and the board holds every card.
fn race(home: &Path, logs: &Path, round: usize) {
    let go = Arc::new(Barrier::new(COMMANDS + 2));
    let outputs: Vec<Output> = std::thread::scope(|scope| {
        let commands: Vec<_> = (0..=COMMANDS)
            .map(|n| {
                let go = go.clone();
                scope.spawn(move || {
                    let title = format!("card {n} of round {round}");
                    let args: Vec<&str> = if n == COMMANDS {
                        vec!["init"]
                    } else {
                        vec!["create", &title, "--json"]
                    };
                    let mut cmd = command(home, &args);
                    go.wait();
                    cmd.output().unwrap()
                })
            })
            .collect();
        let mut gateway = gateway(home, logs, &go);
        let outputs = commands.into_iter().map(|c| c.join().unwrap()).collect();
        let status = home.join("gateway.json");
        wait_until("the gateway's first tick", Duration::from_secs(60), || {
            status.exists() || gateway.try_wait().unwrap().is_some()
        });
        let exited = gateway.try_wait().unwrap();
        let _ = gateway.kill();
        let _ = gateway.wait();
        assert!(
            exited.is_none(),
            "round {round}: the gateway exited ({exited:?}):\n{}{}",
            std::fs::read_to_string(logs.join("gateway.stderr")).unwrap_or_default(),
            std::fs::read_to_string(logs.join("gateway.stdout")).unwrap_or_default()
        );
        outputs
    });
    for (n, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "round {round}: command {n} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let list = command(home, &["list", "--json"]).output().unwrap();
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    let cards: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        cards.as_array().map(Vec::len),
        Some(COMMANDS),
        "round {round}: {cards}"
    );
    let config = std::fs::read_to_string(home.join("config.yaml")).unwrap();
    let template = command(home, &["config", "check"]).output().unwrap();
    assert!(
        template.status.success(),
        "round {round}: the config one of them wrote is whole: {}\n{config}",
        String::from_utf8_lossy(&template.stderr)
    );
}

#[test]
fn processes_starting_together_on_a_home_with_no_board_all_succeed() {
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        race(&dir.path().join("home"), dir.path(), round);
    }
}

/// A board of the schema before this one: every migration but the last, at the version
/// before it, in a home `init` made.
fn older_board(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    let out = command(&home, &["init"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_file(home.join("kanban.db")).unwrap();
    let conn = rusqlite::Connection::open(home.join("kanban.db")).unwrap();
    let older = board_sqlite::MIGRATIONS.len() - 1;
    for sql in &board_sqlite::MIGRATIONS[..older] {
        conn.execute_batch(sql).unwrap();
    }
    conn.pragma_update(None, "application_id", board_sqlite::APPLICATION_ID)
        .unwrap();
    conn.pragma_update(None, "user_version", older as i64).unwrap();
    drop(conn);
    home
}

#[test]
fn processes_starting_together_on_an_older_board_all_succeed() {
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let home = older_board(dir.path());
        race(&home, dir.path(), round);
        let conn = rusqlite::Connection::open(home.join("kanban.db")).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(
            version,
            board_sqlite::SCHEMA_VERSION,
            "round {round}: migrated once"
        );
    }
}
