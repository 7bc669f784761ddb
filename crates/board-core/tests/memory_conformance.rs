//! The conformance suite against the in-memory reference store: the pure core's own check.

use std::sync::Arc;

use board_core::conformance::Backend;
use board_core::memory::MemStore;
use board_core::Store;

/// Every connection to an in-memory board is the same shared store.
struct Memory(Arc<MemStore>);

impl Backend for Memory {
    fn connect(&self) -> Arc<dyn Store> {
        self.0.clone()
    }
}

fn fresh() -> Memory {
    Memory(Arc::new(MemStore::new()))
}

board_core::store_conformance_tests!(fresh(), cases = 3000, race_rounds = 200);
