//! What the CLI tests share: a board in its own temporary home, the `kanban` binary run
//! against it, and a read-only dump of the database to prove a refusal changed nothing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use board_core::{BoardSnapshot, Store, TaskId};
use board_sqlite::SqliteStore;
use serde_json::Value;

pub struct Board {
    pub dir: tempfile::TempDir,
}

impl Board {
    /// A board whose home does not exist yet (the first command creates it).
    pub fn new() -> Board {
        Board {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A board already initialised.
    pub fn init() -> Board {
        let board = Board::new();
        board.kanban(&["init"]).assert().success();
        board
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn db(&self) -> PathBuf {
        self.home().join("kanban.db")
    }

    /// `kanban --home <home> ARGS...`, isolated from the caller's environment.
    pub fn kanban(&self, args: &[&str]) -> Command {
        let mut cmd = bare();
        cmd.arg("--home").arg(self.home()).args(args);
        cmd
    }

    /// Runs a command that must succeed and returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kanban(args).output().expect("run kanban");
        assert!(
            out.status.success(),
            "kanban {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs a `--json` command that must succeed and parses its stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// Creates a task and returns its id.
    pub fn create(&self, args: &[&str]) -> String {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        let task = self.json(&all);
        task["id"].as_str().expect("id").to_owned()
    }

    pub fn snapshot(&self) -> BoardSnapshot {
        snapshot_of(&self.db())
    }
}

pub fn snapshot_of(db: &Path) -> BoardSnapshot {
    SqliteStore::open_read_only(db)
        .expect("open read-only")
        .snapshot()
        .expect("snapshot")
}

/// The binary with none of the caller's board variables.
pub fn bare() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kanban"));
    cmd.env_remove("KANBAN_HOME")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100");
    cmd
}

pub fn task_id(id: &str) -> TaskId {
    id.parse().expect("task id")
}

/// Opens the board for writes the CLI cannot make (recording a worker pid).
pub fn store(board: &Board) -> SqliteStore {
    SqliteStore::open(board.db(), &board_sqlite::Options::default()).expect("open store")
}

pub fn get(board: &Board, id: &str) -> board_core::Task {
    store(board).get(&task_id(id)).expect("task")
}
