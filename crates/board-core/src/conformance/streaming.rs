//! Scenarios of the bounded reads: streamed lists equal collected ones, event filters,
//! pages that cover a board being written to, and the aggregates of `stats` and charts.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use super::{ready_task, Backend, T0};
use crate::store::{EventFilter, Store, StoreError, TaskFilter};
use crate::types::{DaySpend, Finished, LlmCall, Status, StatusCount, Task, TaskId, TaskOrder};
use crate::LlmPurpose;
use crate::{Completion, NewTask, Refusal};

fn ids(tasks: &[Task]) -> Vec<TaskId> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

/// The whole board in `order`, read in pages of `size`, each after the last of the one before.
fn paged(s: &dyn Store, order: TaskOrder, size: usize) -> Vec<TaskId> {
    let (mut paged, mut after) = (Vec::new(), None);
    loop {
        let page = s
            .list(&TaskFilter {
                order,
                limit: Some(size),
                after: after.clone(),
                ..TaskFilter::default()
            })
            .unwrap();
        let Some(last) = page.last() else {
            return paged;
        };
        after = Some(last.id.clone());
        paged.extend(ids(&page));
    }
}

/// A visitor sees what `list` and `events` return, in the same order, and a `Break`
/// ends the read at once.
pub fn streamed_reads_equal_collected_ones(board: &dyn Backend) {
    let s = board.connect();
    for (i, priority) in [0, 3, 1, 3, 0].into_iter().enumerate() {
        let request = NewTask {
            priority,
            ..NewTask::titled(format!("task {i}"))
        };
        s.create(&request, T0 + i as i64).unwrap();
    }
    let filter = TaskFilter::default();
    let mut streamed = Vec::new();
    s.for_each_task(&filter, &mut |t| {
        streamed.push(t);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(streamed, s.list(&filter).unwrap());
    assert_eq!(streamed.len(), 5);
    let mut seen = 0;
    s.for_each_task(&filter, &mut |_| {
        seen += 1;
        if seen == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(seen, 2, "a break ends the read");
    let mut events = Vec::new();
    s.for_each_event(&EventFilter::default(), &mut |e| {
        events.push(e);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(events, s.events(&EventFilter::default()).unwrap());
    assert_eq!(events.len(), 5);
}

/// Events filter by kind and time, `newest` keeps the newest of a limit (oldest first),
/// and `count_events` counts what matches, limit aside.
pub fn events_filter_by_kind_time_and_newest(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "worked on");
    let claim = s.claim(&t.id, 900, T0 + 10).unwrap();
    for i in 0..5 {
        assert!(s.heartbeat(&t.id, claim.run_id, 900, None, T0 + 20 + i).unwrap());
    }
    let of_task = EventFilter {
        task_id: Some(t.id.clone()),
        ..EventFilter::default()
    };
    let all = s.events(&of_task).unwrap();
    let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "created",
            "claimed",
            "heartbeat",
            "heartbeat",
            "heartbeat",
            "heartbeat",
            "heartbeat"
        ]
    );
    assert_eq!(s.count_events(&of_task).unwrap(), 7);
    let newest = EventFilter {
        limit: Some(3),
        newest: true,
        ..of_task.clone()
    };
    assert_eq!(s.events(&newest).unwrap(), all[4..].to_vec());
    assert_eq!(s.count_events(&newest).unwrap(), 7, "the limit does not count");
    let oldest = EventFilter {
        limit: Some(3),
        ..of_task.clone()
    };
    assert_eq!(s.events(&oldest).unwrap(), all[..3].to_vec());
    let beats = EventFilter {
        kinds: vec!["heartbeat".into()],
        ..EventFilter::default()
    };
    assert_eq!(s.count_events(&beats).unwrap(), 5);
    let two = EventFilter {
        kinds: vec!["heartbeat".into(), "created".into(), "no_such_kind".into()],
        ..EventFilter::default()
    };
    let kinds: Vec<String> = s.events(&two).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds.len(), s.count_events(&two).unwrap() as usize);
    assert!(
        kinds.iter().filter(|k| *k == "heartbeat").count() == 5,
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "created"), "{kinds:?}");
    assert!(
        kinds.iter().all(|k| k == "heartbeat" || k == "created"),
        "{kinds:?}"
    );
    let since = EventFilter {
        since: Some(T0 + 22),
        ..EventFilter::default()
    };
    let late: Vec<i64> = s.events(&since).unwrap().iter().map(|e| e.created_at).collect();
    assert_eq!(late, [T0 + 22, T0 + 23, T0 + 24]);
    let none = EventFilter {
        kinds: vec!["no_such_kind".into()],
        newest: true,
        limit: Some(100),
        ..EventFilter::default()
    };
    assert!(s.events(&none).unwrap().is_empty());
    let unknown = TaskId::from_random([9, 9, 9, 9]);
    let missing = StoreError::Refused(Refusal::NoSuchTask(unknown.clone()));
    let of_unknown = EventFilter {
        task_id: Some(unknown),
        ..EventFilter::default()
    };
    assert_eq!(s.count_events(&of_unknown).unwrap_err(), missing);
    let other = s
        .create(
            &NewTask {
                assignee: Some("coder".into()),
                ..NewTask::titled("someone else's")
            },
            T0 + 30,
        )
        .unwrap();
    let coders = EventFilter {
        assignee: Some("coder".into()),
        ..EventFilter::default()
    };
    let theirs = s.events(&coders).unwrap();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(
        (&theirs[0].task_id, theirs[0].kind.as_str()),
        (&other.id, "created")
    );
    assert_eq!(s.count_events(&coders).unwrap(), 1);
    let nobodys = EventFilter {
        assignee: Some("nobody".into()),
        newest: true,
        limit: Some(5),
        ..EventFilter::default()
    };
    assert!(s.events(&nobodys).unwrap().is_empty());
}

/// Pages of `limit` tasks, each after the last of the one before, read every task that
/// was on the board throughout exactly once, while another connection creates tasks of
/// every priority between the pages; an unknown cursor is refused.
pub fn pages_cover_every_task_once(board: &dyn Backend) {
    let s = board.connect();
    let writer = board.connect();
    let mut present = Vec::new();
    for i in 0..23i64 {
        let request = NewTask {
            priority: i % 4,
            ..NewTask::titled(format!("present {i}"))
        };
        present.push(s.create(&request, T0 + i % 5).unwrap().id);
    }
    let mut seen: BTreeMap<TaskId, usize> = BTreeMap::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = s
            .list(&TaskFilter {
                limit: Some(4),
                after: after.clone(),
                ..TaskFilter::default()
            })
            .unwrap();
        for t in &page {
            *seen.entry(t.id.clone()).or_default() += 1;
        }
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        pages += 1;
        let request = NewTask {
            priority: pages % 5 - 1,
            ..NewTask::titled(format!("added {pages}"))
        };
        writer.create(&request, T0 + pages % 7).unwrap();
    }
    for id in &present {
        assert_eq!(seen.get(id), Some(&1), "{id} read once");
    }
    assert!(seen.values().all(|n| *n == 1), "no task read twice: {seen:?}");
    let unknown = TaskId::from_random([7, 7, 7, 7]);
    let refused = s.list(&TaskFilter {
        after: Some(unknown.clone()),
        ..TaskFilter::default()
    });
    assert_eq!(
        refused.unwrap_err(),
        StoreError::Refused(Refusal::NoSuchTask(unknown))
    );
    let ready = s
        .list(&TaskFilter {
            status: Some(Status::Ready),
            limit: Some(2),
            ..TaskFilter::default()
        })
        .unwrap();
    let next = s
        .list(&TaskFilter {
            status: Some(Status::Ready),
            limit: Some(2),
            after: Some(ready[1].id.clone()),
            ..TaskFilter::default()
        })
        .unwrap();
    let all_ready = s.list(&TaskFilter {
        status: Some(Status::Ready),
        ..TaskFilter::default()
    });
    assert_eq!(ids(&all_ready.unwrap()[2..4]), ids(&next));
    // With no writer meanwhile, pages of any size laid end to end are the whole list,
    // in its order, across every priority and tie of creation time.
    let whole = ids(&s.list(&TaskFilter::default()).unwrap());
    for size in [1, 3, 7] {
        assert_eq!(paged(&*s, TaskOrder::Priority, size), whole, "pages of {size}");
    }
}

/// The counts of `stats` and the web board's charts, each from one aggregate.
pub fn aggregates_count_the_board(board: &dyn Backend) {
    let s = board.connect();
    assert!(s.status_counts().unwrap().is_empty());
    assert_eq!(s.oldest(Status::Ready).unwrap(), None);
    let first = ready_task(&*s, "first");
    let ana = NewTask {
        assignee: Some("ana".into()),
        ..NewTask::titled("hers")
    };
    let hers = s.create(&ana, T0 + 5).unwrap();
    let quick = s.create(&NewTask::titled("quick"), T0 + 7).unwrap();
    s.claim(&quick.id, 900, T0 + 100).unwrap();
    assert!(s.complete(&quick.id, &Completion::default(), T0 + 130).unwrap());
    s.claim(&hers.id, 900, T0 + 100).unwrap();
    assert!(s.complete(&hers.id, &Completion::default(), T0 + 4000).unwrap());
    let counts = s.status_counts().unwrap();
    let count = |who: Option<&str>, status, tasks| StatusCount {
        assignee: who.map(str::to_owned),
        status,
        tasks,
    };
    assert_eq!(
        counts,
        vec![
            count(None, Status::Done, 1),
            count(None, Status::Ready, 1),
            count(Some("ana"), Status::Done, 1),
        ]
    );
    assert_eq!(s.oldest(Status::Ready).unwrap().map(|t| t.id), Some(first.id));
    let finished = s.finished(T0, 3600, &[60, 3600, 86_400]).unwrap();
    assert_eq!(
        finished,
        vec![
            Finished {
                slot: 0,
                bucket: 1,
                tasks: 1
            },
            Finished {
                slot: 1,
                bucket: 2,
                tasks: 1
            },
        ],
        "quick: 123 s from creation; hers: 3995 s"
    );
    assert!(s.finished(T0 + 200, 3600, &[60]).unwrap().len() == 1);
    let call = |started_at, outcome: &str| LlmCall {
        task_id: None,
        purpose: LlmPurpose::Decompose,
        model: "m".into(),
        started_at,
        duration_ms: 5,
        outcome: outcome.parse().expect("an outcome"),
        http_status: None,
        prompt_tokens: Some(10),
        completion_tokens: Some(2),
        error: None,
        cost: None,
        over_budget: false,
    };
    let day = T0.div_euclid(86_400);
    for c in [
        call(day * 86_400 - 1, "ok"),
        call(day * 86_400, "ok"),
        call(day * 86_400 + 5, "timeout"),
    ] {
        s.record_llm_call(&c).unwrap();
    }
    let spend = |day, requests, tokens, failures| DaySpend {
        day,
        requests,
        tokens,
        failures,
    };
    assert_eq!(
        s.daily_spend(0).unwrap(),
        vec![spend(day - 1, 1, 12, 0), spend(day, 2, 24, 1)]
    );
    assert_eq!(s.daily_spend(day * 86_400).unwrap(), vec![spend(day, 2, 24, 1)]);
}

/// Every order of `list --sort` is the store's, and pages of it (each after the last of
/// the one before) read it whole; titles sort byte by byte.
pub fn sorted_lists_page_in_their_order(board: &dyn Backend) {
    let s = board.connect();
    let make = |title: &str, priority: i64, triage: bool, at: i64| {
        let assignee = match title {
            "apple" => Some("bob".to_owned()),
            "Zulu" => Some("alice".to_owned()),
            _ => None,
        };
        let request = NewTask {
            priority,
            triage,
            assignee,
            ..NewTask::titled(title)
        };
        s.create(&request, at).unwrap().id
    };
    let banana = make("banana", 1, false, T0);
    let apple = make("apple", 5, false, T0 + 1);
    let zulu = make("Zulu", 0, false, T0 + 2);
    let date = make("date", 2, true, T0 + 3);
    let elder = make("elder", 3, false, T0 + 4);
    s.edit(&apple, None, Some("changed last".into()), None, T0 + 10)
        .unwrap();
    let expected = [
        (TaskOrder::Priority, vec![&apple, &elder, &date, &banana, &zulu]),
        (TaskOrder::Created, vec![&banana, &apple, &zulu, &date, &elder]),
        (
            TaskOrder::CreatedDesc,
            vec![&elder, &date, &zulu, &apple, &banana],
        ),
        (
            TaskOrder::PriorityDesc,
            vec![&zulu, &banana, &date, &elder, &apple],
        ),
        (TaskOrder::Assignee, vec![&banana, &date, &elder, &zulu, &apple]),
        (TaskOrder::Updated, vec![&apple, &elder, &date, &zulu, &banana]),
        (TaskOrder::Title, vec![&zulu, &apple, &banana, &date, &elder]),
        (TaskOrder::Status, vec![&date, &apple, &elder, &banana, &zulu]),
    ];
    for (order, want) in expected {
        let want: Vec<TaskId> = want.into_iter().cloned().collect();
        let all = s
            .list(&TaskFilter {
                order,
                ..TaskFilter::default()
            })
            .unwrap();
        assert_eq!(ids(&all), want, "{order}");
        assert_eq!(paged(&*s, order, 2), want, "{order} in pages");
    }
    let ready_by_title = s
        .list(&TaskFilter {
            order: TaskOrder::Title,
            status: Some(Status::Ready),
            ..TaskFilter::default()
        })
        .unwrap();
    assert_eq!(ids(&ready_by_title), [zulu, apple, banana, elder]);
    let unknown = TaskId::from_random([7, 7, 7, 8]);
    let refused = s.list(&TaskFilter {
        order: TaskOrder::Title,
        after: Some(unknown.clone()),
        ..TaskFilter::default()
    });
    assert_eq!(
        refused.unwrap_err(),
        StoreError::Refused(Refusal::NoSuchTask(unknown))
    );
}
