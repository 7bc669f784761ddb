//! The dispatcher's reads on a large board are index ranges, not scans of `tasks`: their
//! cost follows the rows they return (ready, running, due triage), not the board's size.

mod common;

use common::TestSchema;

/// Mostly finished work, as on a board that has run for a while.
const DONE: i64 = 20_000;

#[test]
fn dispatcher_reads_are_served_by_indexes_on_a_large_board() {
    let schema = TestSchema::new();
    let store = schema.open();
    schema.execute(&format!(
        "INSERT INTO tasks (id, title, status, created_at, updated_at)
           SELECT 't_' || lpad(to_hex(g), 8, '0'), 'old work', 'done', g, g
           FROM generate_series(1, {DONE}) g;
         INSERT INTO tasks (id, title, status, created_at, updated_at)
           SELECT 't_' || lpad(to_hex(g), 8, '0'), 'queued', 'ready', g, g
           FROM generate_series({DONE} + 1, {DONE} + 50) g;
         INSERT INTO tasks (id, title, status, created_at, updated_at, current_run_id, claim_lock,
                            claim_expires)
           SELECT 't_' || lpad(to_hex(g), 8, '0'), 'working', 'running', g, g, g, 'lock', g
           FROM generate_series({DONE} + 51, {DONE} + 60) g;
         INSERT INTO tasks (id, title, status, created_at, updated_at)
           SELECT 't_' || lpad(to_hex(g), 8, '0'), 'rough', 'triage', g, g
           FROM generate_series({DONE} + 61, {DONE} + 70) g;
         ANALYZE tasks"
    ));
    let plans = store.explain_dispatcher_reads(DONE + 100).unwrap();
    let names: Vec<&str> = plans.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["claimable", "expired_leases", "running", "due_triage"]);
    for (name, plan) in &plans {
        assert!(
            !plan.contains("Seq Scan on tasks") && plan.contains("Index"),
            "{name} scans the board:\n{plan}"
        );
    }
}
