//! A whole listing is read on a thread of its own and handed over in batches: across
//! many batches it is the same rows in the same order as the pages of the one-thread
//! read, and a visitor that stops early leaves the board as it found it.

use std::ops::ControlFlow;

use board_core::{BoardReads, BoardWrites, NewTask, Status, TaskFilter, TaskId, TaskOrder};
use board_sqlite::{Options, SqliteStore, Synchronous};

/// More rows than several of the reader's batches, and not a whole number of them.
const TASKS: usize = 3 * 256 + 7;

fn board(dir: &tempfile::TempDir) -> SqliteStore {
    let options = Options {
        synchronous: Synchronous::Normal,
        ..Options::default()
    };
    let store = SqliteStore::open(dir.path().join("kanban.db"), &options).unwrap();
    for i in 0..TASKS {
        let mut task = NewTask::titled(format!("task {i}"));
        task.priority = i64::try_from(i % 7).unwrap();
        task.assignee = Some(["a", "b"][i % 2].to_owned());
        // Some in another status, so a status filter is a range of its own.
        task.triage = i % 5 == 0;
        store
            .create(&task, 1_000 + i64::try_from(i / 3).unwrap())
            .unwrap();
    }
    store
}

fn whole(store: &SqliteStore, filter: &TaskFilter) -> Vec<TaskId> {
    let mut ids = Vec::new();
    store
        .for_each_task(filter, &mut |t| {
            ids.push(t.id);
            ControlFlow::Continue(())
        })
        .unwrap();
    ids
}

/// The same listing read a page of 100 at a time, each page after the last one's task.
fn paged(store: &SqliteStore, filter: &TaskFilter) -> Vec<TaskId> {
    let mut ids: Vec<TaskId> = Vec::new();
    loop {
        let page = TaskFilter {
            limit: Some(100),
            after: ids.last().cloned(),
            ..filter.clone()
        };
        let got = whole(store, &page);
        if got.is_empty() {
            return ids;
        }
        ids.extend(got);
    }
}

#[test]
fn a_whole_listing_across_batches_is_its_pages_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = board(&dir);
    let filters = [
        TaskFilter::default(),
        TaskFilter {
            status: Some(Status::Ready),
            ..TaskFilter::default()
        },
        TaskFilter {
            assignee: Some("b".to_owned()),
            order: TaskOrder::CreatedDesc,
            ..TaskFilter::default()
        },
    ];
    for filter in filters {
        let all = whole(&store, &filter);
        assert!(all.len() > 256, "{filter:?}: {} rows", all.len());
        assert_eq!(all, paged(&store, &filter), "{filter:?}");
    }
    assert_eq!(whole(&store, &TaskFilter::default()).len(), TASKS);
}

#[test]
fn a_listing_stopped_early_ends_its_read_and_the_board_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = board(&dir);
    let mut seen = 0;
    store
        .for_each_task(&TaskFilter::default(), &mut |_| {
            seen += 1;
            match seen {
                10 => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        })
        .unwrap();
    assert_eq!(seen, 10);
    // The reader's transaction is over: the connection writes at once, and the next
    // listing sees the write.
    store.create(&NewTask::titled("after"), 9_999).unwrap();
    assert_eq!(whole(&store, &TaskFilter::default()).len(), TASKS + 1);
}
