//! The store conformance suite, the thread races and the random-operation property test,
//! against SQLite files: every `connect` opens its own connection to the same file.

use std::path::PathBuf;
use std::sync::Arc;

use board_core::conformance::Backend;
use board_core::Store;
use board_sqlite::{Options, SqliteStore, Synchronous};

struct SqliteBoard {
    _dir: tempfile::TempDir,
    path: PathBuf,
    options: Options,
}

impl Backend for SqliteBoard {
    fn connect(&self) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&self.path, &self.options).expect("open board"))
    }
}

fn board_with(options: Options, dir: tempfile::TempDir) -> SqliteBoard {
    let path = dir.path().join("kanban.db");
    SqliteBoard {
        _dir: dir,
        path,
        options,
    }
}

/// A board with the settings a real one has, in the temporary directory.
fn fresh() -> SqliteBoard {
    board_with(Options::default(), tempfile::tempdir().expect("tempdir"))
}

/// The property test's boards live in memory when the machine has a tmpfs at /dev/shm and
/// skip the fsync at every commit. Neither decides anything (what a transaction reads,
/// writes and refuses is the same); 2000 boards of ~30 commits each would otherwise
/// spend minutes waiting on a shared disk.
fn in_memory() -> SqliteBoard {
    let options = Options {
        synchronous: Synchronous::Normal,
        ..Options::default()
    };
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir());
    board_with(options, dir.expect("tempdir"))
}

board_core::store_conformance_tests!(
    fresh(),
    cases = 2000,
    race_rounds = 200,
    property_board = in_memory()
);
