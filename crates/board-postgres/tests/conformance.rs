//! The store conformance suite, the thread races and the random-operation property test,
//! against PostgreSQL: each test (and each property case) in a fresh schema, dropped at
//! its end, and every `connect` a separate store with its own connections.

mod common;

board_core::store_conformance_tests!(common::fresh(), cases = 80, race_rounds = 100);
