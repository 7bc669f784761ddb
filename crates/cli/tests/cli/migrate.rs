//! `kanban migrate`: a board copied SQLite -> PostgreSQL -> SQLite is the same board,
//! row for row in every table, ids kept, and still meets every invariant; a target that
//! is not empty is refused untouched; the password of a URL is never printed.

use std::path::Path;
use std::process::Output;

use board_core::copy::{BoardCopy, Datum};
use board_core::{
    BoardStats, BoardWrites, BreakerSignal, Completion, Fault, LaneDesk, LlmCall, LlmLedger, NewTask,
    TriageQueue,
};
use board_postgres::{Options, PgStore};
use board_sqlite::SqliteStore;

use crate::gateway_board::kanban_at;
use crate::scratch_schema::{server_url, unique_schema};
use board_core::{LlmOutcome, LlmPurpose};

const PASSWORD: &str = "migrate-canary-9d3f";

fn kanban(home: &Path, url: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = kanban_at(home, args);
    if let Some(url) = url {
        cmd.env("KANBAN_DATABASE_URL", url);
    }
    cmd.output().unwrap()
}

/// Every table's rows, as the copy reads them.
fn rows(board: &dyn BoardCopy) -> Vec<(String, Vec<String>, Vec<Vec<Datum>>)> {
    let mut all: Vec<(String, Vec<String>, Vec<Vec<Datum>>)> = Vec::new();
    board
        .export(&mut |batch| {
            match all.last_mut() {
                Some(last) if last.0 == batch.table => last.2.extend_from_slice(batch.rows),
                _ => all.push((
                    batch.table.to_owned(),
                    batch.columns.to_vec(),
                    batch.rows.to_vec(),
                )),
            }
            Ok(())
        })
        .unwrap();
    all
}

/// A board with a row in every table: tasks in several states, a link, runs, events,
/// comments, a file's bytes, a webhook, the ledger, a decomposition lease, a breaker that has seen a fault and a
/// lane holding a run.
fn fill(store: &SqliteStore) {
    let now = 1_700_000_000;
    let token = board_core::lanes::token_from([9; 32]);
    let lane = board_core::lanes::Lane::new("remote", &["ext".into()], &token, now).unwrap();
    store.create_lane(&lane).unwrap();
    let held = NewTask {
        assignee: Some("ext".into()),
        ..NewTask::titled("held by a lane")
    };
    store.create(&held, now).unwrap();
    let claimed = store
        .claim_for_lane("remote", 600, 4, &|_| board_core::Checks::default(), now)
        .unwrap();
    assert!(matches!(claimed, board_core::lanes::LaneClaim::Claimed(_)));
    let parent = store.create(&NewTask::titled("parent"), now).unwrap();
    let child = store.create(&NewTask::titled("child"), now).unwrap();
    store.link(&parent.id, &child.id, now).unwrap();
    let claim = store.claim(&parent.id, 600, now + 1).unwrap();
    let completion = Completion {
        expected_run_id: Some(claim.run_id),
        result: Some("done, with \"quotes\" and ünïcode".into()),
        ..Completion::default()
    };
    assert!(store.complete(&parent.id, &completion, now + 2).unwrap());
    store.claim(&child.id, 600, now + 3).unwrap();
    store
        .comment(&child.id, Some("ana"), "halfway", None, now + 4)
        .unwrap();
    let file = board_core::NewAttachment {
        name: "scan.bin".into(),
        content_type: Some("application/octet-stream".into()),
        created_by: Some("ana".into()),
        content: (0..=255u8).rev().collect(),
    };
    board_core::AttachmentShelf::attach(store, &child.id, &file, now + 4).unwrap();
    let hook = board_core::notify::NewSubscription {
        task_id: Some(child.id.clone()),
        kinds: vec!["completed".into()],
        url: "https://example.com/hook".into(),
        secret: "a-secret-of-16-bytes".into(),
    };
    board_core::notify::NotifyDesk::subscribe(store, &hook, now + 4).unwrap();
    let mut card = NewTask::titled("a rough idea");
    card.triage = true;
    let card = store.create(&card, now + 5).unwrap();
    store
        .lease_decomposition(&card.id, "host/1", 60, now + 6, None)
        .unwrap();
    store
        .record_llm_call(&LlmCall {
            task_id: Some(card.id.clone()),
            purpose: LlmPurpose::Decompose,
            model: "fake".into(),
            started_at: now + 6,
            duration_ms: 120,
            outcome: LlmOutcome::HttpError,
            http_status: Some(500),
            prompt_tokens: Some(10),
            completion_tokens: None,
            error: Some("model answered HTTP 500".into()),
            cost: Some(0.25),
            over_budget: true,
        })
        .unwrap();
    let fault = BreakerSignal::Down(Fault {
        card: card.id.clone(),
        attempt: "a1".into(),
        error: "model answered HTTP 500".into(),
        auth: false,
        retry_after: None,
    });
    store
        .signal_breaker(&fault, &board_core::BreakerSettings::default(), now + 7)
        .unwrap();
}

fn schema_url(base: &str, schema: &str, password: &str) -> String {
    let (scheme, rest) = base.split_once("://").expect("a URL");
    let (user, hosts) = rest.split_once('@').expect("a user in the test server's URL");
    let user = user.split(':').next().unwrap_or(user);
    let joiner = if hosts.contains('?') { '&' } else { '?' };
    format!("{scheme}://{user}:{password}@{hosts}{joiner}options=-csearch_path%3D{schema}")
}

#[test]
fn a_board_survives_a_round_trip_through_postgres() {
    let base = server_url();
    let schema = unique_schema("kanban_migrate");
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap();
    let url = schema_url(&base, &schema, PASSWORD);
    let result = std::panic::catch_unwind(|| round_trip(&url));
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn round_trip(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_home = dir.path().join("sqlite-home");
    let pg_home = dir.path().join("pg-home");
    let back = dir.path().join("back.db");
    let mut printed = Vec::new();
    let init = kanban(&sqlite_home, None, &["init"]);
    assert!(init.status.success(), "{init:?}");
    fill(&SqliteStore::open(sqlite_home.join("kanban.db"), &Default::default()).unwrap());

    let out = kanban(&sqlite_home, None, &["migrate", "--to", url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("tasks 4") && said.contains("lanes 1"), "{said}");
    printed.push(out);

    // Into a board that is no longer empty: refused, in one line, nothing written.
    let again = kanban(&sqlite_home, None, &["migrate", "--to", url]);
    assert_eq!(again.status.code(), Some(1));
    let error = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(
        error.contains("is not an empty board") && error.lines().count() == 1,
        "{error}"
    );
    printed.push(again);

    let pg = PgStore::open(url, &Options::default()).unwrap();
    board_core::check_invariants(&pg.snapshot().unwrap()).unwrap();
    let out = kanban(
        &pg_home,
        Some(url),
        &["migrate", "--to", &format!("sqlite:{}", back.display())],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    printed.push(out);

    let source = SqliteStore::open_read_only(sqlite_home.join("kanban.db")).unwrap();
    let returned = SqliteStore::open_read_only(&back).unwrap();
    assert_eq!(
        rows(&source),
        rows(&returned),
        "every table's rows, SQLite -> PostgreSQL -> SQLite"
    );
    assert_eq!(rows(&source).len(), board_core::copy::TABLES.len());
    assert_eq!(source.snapshot().unwrap(), pg.snapshot().unwrap());
    board_core::check_invariants(&returned.snapshot().unwrap()).unwrap();

    // The copies go on as boards: new rows take ids past the copied ones.
    let now = 1_700_000_100;
    let task = pg.create(&NewTask::titled("after the move"), now).unwrap();
    let claim = pg.claim(&task.id, 60, now).unwrap();
    let runs = source.snapshot().unwrap().runs;
    assert!(runs.iter().all(|r| r.id < claim.run_id), "a fresh run id");

    let bad = kanban(&sqlite_home, None, &["migrate", "--to", ""]);
    assert_eq!(bad.status.code(), Some(2));
    for out in printed.iter().chain([&bad]) {
        for bytes in [&out.stdout, &out.stderr] {
            assert!(
                !String::from_utf8_lossy(bytes).contains(PASSWORD),
                "migrate printed the password"
            );
        }
    }
}
