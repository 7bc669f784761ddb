//! What a commit writes: the pages a transition appends to the WAL are those of the rows
//! and index entries it changes, and no others (each is a frame written, and with
//! `synchronous = FULL` made durable, at every commit).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use board_core::store::Offer;
use board_core::transition::Completion;
use board_core::{BoardReads, BoardWrites, DispatchQueue, NewTask, Request, Status};
use board_sqlite::{Options, SqliteStore};
use rusqlite::Connection;

const PAGE: u64 = 1024;
const WAL_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;

/// The b-trees (tables and indexes) of the pages the WAL holds from byte `from` on.
fn written_since(db: &Path, from: u64) -> BTreeSet<String> {
    let wal = std::fs::read(db.with_extension("db-wal")).unwrap();
    let frame = FRAME_HEADER + PAGE;
    let first = from.saturating_sub(WAL_HEADER).div_ceil(frame);
    let pages: Vec<u32> = (first..)
        .map(|n| usize::try_from(WAL_HEADER + n * frame).unwrap())
        .take_while(|at| at + usize::try_from(frame).unwrap() <= wal.len())
        .map(|at| u32::from_be_bytes(wal[at..at + 4].try_into().unwrap()))
        .collect();
    let conn = Connection::open(db).unwrap();
    let mut names = conn.prepare("SELECT name FROM dbstat WHERE pageno = ?1").unwrap();
    pages
        .iter()
        .map(|page| names.query_row([page], |r| r.get(0)).unwrap())
        .collect()
}

/// A new board in a directory of its own (kept as long as the directory lives).
fn fresh() -> (tempfile::TempDir, PathBuf, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kanban.db");
    let store = SqliteStore::open(&db, &Options::default()).unwrap();
    (dir, db, store)
}

fn wal_len(db: &Path) -> u64 {
    std::fs::metadata(db.with_extension("db-wal")).unwrap().len()
}

#[test]
fn a_claim_and_a_completion_write_no_entry_of_an_index_whose_columns_they_keep() {
    let (_dir, db, store) = fresh();
    let tenanted = NewTask {
        tenant: Some("acme".into()),
        ..NewTask::titled("tenanted")
    };
    let ids: Vec<_> = [NewTask::titled("plain"), tenanted.clone(), tenanted]
        .iter()
        .map(|t| store.create(t, 1).unwrap().id)
        .collect();
    for id in &ids[..2] {
        let before = wal_len(&db);
        let claim = store.claim(id, 60, 2).unwrap();
        let completion = Completion {
            expected_run_id: Some(claim.run_id),
            ..Completion::default()
        };
        assert!(store.complete(id, &completion, 3).unwrap());
        let written = written_since(&db, before);
        assert!(written.contains("tasks_by_status"), "{written:?}");
        for kept in ["tasks_by_priority", "tasks_by_tenant"] {
            assert!(!written.contains(kept), "{kept} written: {written:?}");
        }
    }
    // An edit that changes them does write them.
    let before = wal_len(&db);
    store.edit(&ids[2], None, None, Some(7), 4).unwrap();
    let written = written_since(&db, before);
    for changed in ["tasks_by_priority", "tasks_by_tenant"] {
        assert!(written.contains(changed), "{changed} not written: {written:?}");
    }
}

/// The commits appended to the WAL from byte `from` on: the frames whose header holds
/// the database's size after the commit (other frames hold 0 there).
fn commits_since(db: &Path, from: u64) -> usize {
    let wal = std::fs::read(db.with_extension("db-wal")).unwrap();
    let frame = usize::try_from(FRAME_HEADER + PAGE).unwrap();
    let first = usize::try_from(from.saturating_sub(WAL_HEADER).div_ceil(FRAME_HEADER + PAGE)).unwrap();
    (first..)
        .map(|n| usize::try_from(WAL_HEADER).unwrap() + n * frame)
        .take_while(|at| at + frame <= wal.len())
        .filter(|at| wal[at + 4..at + 8] != [0; 4])
        .count()
}

/// A tick's claims are one transaction and one commit (one `fsync` with `synchronous =
/// FULL`); an offered task that cannot be claimed now is passed over, and any other
/// refusal claims none.
#[test]
fn the_claims_of_a_tick_are_one_commit() {
    let (_dir, db, store) = fresh();
    let ids: Vec<_> = (0..4)
        .map(|i| store.create(&NewTask::titled(format!("task {i}")), 1).unwrap().id)
        .collect();
    store.claim(&ids[1], 60, 2).unwrap();
    let offers: Vec<Offer> = ids.iter().cloned().map(Offer::work).collect();
    let before = wal_len(&db);
    let claims = store.claim_ready(&offers, 60, Some("host-a"), 3).unwrap();
    let claimed: Vec<_> = claims.iter().map(|c| c.task.id.clone()).collect();
    assert_eq!(claimed, [ids[0].clone(), ids[2].clone(), ids[3].clone()]);
    assert_eq!(commits_since(&db, before), 1);
    // Any other refusal (here a lease of no time) claims none of the offers.
    let more: Vec<_> = (0..2)
        .map(|i| store.create(&NewTask::titled(format!("more {i}")), 4).unwrap().id)
        .collect();
    let offers: Vec<Offer> = more.iter().cloned().map(Offer::work).collect();
    assert!(store.claim_ready(&offers, 0, None, 5).is_err());
    for id in &more {
        assert_eq!(store.get(id).unwrap().status, Status::Ready);
    }
}

/// The workers a tick starts are recorded on their runs in one commit; a request
/// refused among them (a run that changed meanwhile) changes nothing and the others
/// are recorded.
#[test]
fn the_workers_of_a_tick_are_recorded_in_one_commit() {
    let (_dir, db, store) = fresh();
    let claims: Vec<_> = (0..3)
        .map(|i| {
            let id = store.create(&NewTask::titled(format!("task {i}")), 1).unwrap().id;
            store.claim(&id, 60, 2).unwrap()
        })
        .collect();
    let set = |claim: &board_core::Claim, lock: &str, pid: i64| {
        (
            claim.task.id.clone(),
            Request::SetWorker {
                run_id: claim.run_id,
                claim_lock: lock.to_owned(),
                pid,
                host: "host-a".to_owned(),
            },
        )
    };
    let requests = vec![
        set(&claims[0], &claims[0].claim_lock, 100),
        set(&claims[1], "not its lock", 101),
        set(&claims[2], &claims[2].claim_lock, 102),
    ];
    let before = wal_len(&db);
    let outcomes = store.transition_each(&requests, 3).unwrap();
    assert_eq!(commits_since(&db, before), 1);
    let refused: Vec<bool> = outcomes.iter().map(Result::is_err).collect();
    assert_eq!(refused, [false, true, false]);
    let pid = |claim: &board_core::Claim| store.runs(&claim.task.id).unwrap()[0].worker_pid;
    assert_eq!(pid(&claims[0]), Some(100));
    assert_eq!(pid(&claims[1]), None);
    assert_eq!(pid(&claims[2]), Some(102));
}
