//! Sessions the server ends: a store whose pooled connections were terminated (a
//! restart, `pg_terminate_backend`) opens new ones and goes on without an error.

mod common;

use board_core::{BoardReads, BoardWrites, NewTask};
use board_postgres::{Options, PgStore};
use common::TestSchema;

#[test]
fn terminated_sessions_are_replaced_without_an_error() {
    let schema = TestSchema::new();
    let options = Options {
        application_name: schema.name.clone(),
        max_connections: 2,
        ..schema.options()
    };
    let store = PgStore::open(&common::url(), &options).unwrap();
    let task = store.create(&NewTask::titled("before"), 1).unwrap();
    let mut admin = common::admin();
    let mut terminate = |round: usize| {
        let ended: i64 = admin
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE application_name = $1) AS t",
                &[&schema.name],
            )
            .unwrap()
            .get(0);
        assert!(ended >= 1, "round {round}: the store had a session to end");
    };
    for round in 0..3 {
        terminate(round);
        assert_eq!(
            store.get(&task.id).unwrap().id,
            task.id,
            "round {round}: a single read"
        );
        terminate(round);
        assert!(
            store.runs(&task.id).unwrap().is_empty(),
            "round {round}: a read transaction"
        );
        terminate(round);
        store
            .create(&NewTask::titled(format!("after {round}")), 2)
            .unwrap_or_else(|e| panic!("round {round}: a write: {e}"));
    }
    assert_eq!(store.list(&Default::default()).unwrap().len(), 4);
}
