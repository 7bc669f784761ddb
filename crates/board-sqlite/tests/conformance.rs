//! The store conformance suite, the thread races and the random-operation property test,
//! against SQLite files: every `connect` opens its own connection to the same file.

use std::path::PathBuf;
use std::sync::Arc;

use board_core::conformance::Board;
use board_core::Store;
use board_sqlite::{Options, SqliteStore};

struct SqliteBoard {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Board for SqliteBoard {
    fn connect(&self) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&self.path, &Options::default()).expect("open board"))
    }
}

fn fresh() -> SqliteBoard {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kanban.db");
    SqliteBoard { _dir: dir, path }
}

board_core::store_conformance_tests!(fresh(), cases = 2000, race_rounds = 200);
