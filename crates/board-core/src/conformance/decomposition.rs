//! Scenarios of the decomposer's commit: plans, their guards, and the history that blocks
//! automatic decomposition.

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::plan::{Mode, Plan, PlanBasis, PlanSettings, PlannedTask};
use crate::store::StoreError;
use crate::types::{BlockKind, Status, TaskId};
use crate::{NewTask, Refusal};
use std::collections::BTreeSet;

/// The automatic decomposition guards and the commit of both plan shapes.
// A test scenario, longer than 80 lines: each guard is checked on the board the step
// before it left.
pub fn decomposition_commits_and_guards(board: &dyn Backend) {
    let s = board.connect();
    let settings = PlanSettings {
        orchestrator: "lead".into(),
        ..PlanSettings::default()
    };
    let card = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("build a thing")
            },
            T0,
        )
        .unwrap();
    let due = s.due_triage(T0, 10).unwrap();
    assert_eq!(due.iter().map(|t| &t.id).collect::<Vec<_>>(), vec![&card.id]);
    let basis = PlanBasis::of(&s.facts(&card.id).unwrap());
    let planned = |title: &str, parents: Vec<usize>| PlannedTask {
        title: title.into(),
        body: String::new(),
        assignee: "default".into(),
        parents,
    };
    let plan = Plan::Fanout {
        rationale: None,
        tasks: vec![
            planned("one", vec![]),
            planned("two", vec![]),
            planned("three", vec![0]),
        ],
    };
    let committed = s
        .commit_plan(&card.id, &basis, Mode::Automatic, &plan, &settings, T0 + 1)
        .unwrap();
    assert_eq!(committed.child_ids.len(), 3);
    let root = s.get(&card.id).unwrap();
    assert_eq!(root.status, Status::Todo);
    assert_eq!(root.assignee.as_deref(), Some("lead"));
    let kids: Vec<Status> = committed
        .child_ids
        .iter()
        .map(|id| s.get(id).unwrap().status)
        .collect();
    assert_eq!(kids, vec![Status::Ready, Status::Ready, Status::Todo]);
    let parents_of_third: Vec<TaskId> = s
        .parents(&committed.child_ids[2])
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(parents_of_third, vec![committed.child_ids[0].clone()]);
    let root_parents: BTreeSet<TaskId> = s.parents(&card.id).unwrap().into_iter().map(|t| t.id).collect();
    assert_eq!(root_parents, committed.child_ids.iter().cloned().collect());
    let decomposed: Vec<_> = s
        .events(&crate::EventFilter {
            task_id: Some(card.id.clone()),
            ..Default::default()
        })
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "decomposed")
        .collect();
    assert_eq!(decomposed.len(), 1);
    assert_eq!(
        decomposed[0].payload["child_ids"],
        serde_json::json!(committed.child_ids)
    );
    // Never twice.
    assert!(s
        .commit_plan(&card.id, &basis, Mode::Manual, &plan, &settings, T0 + 2)
        .is_err());

    // A card that gained a run while the model answered is not decomposed.
    let busy = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("busy")
            },
            T0,
        )
        .unwrap();
    let basis = PlanBasis::of(&s.facts(&busy.id).unwrap());
    s.edit(&busy.id, Some("busy, edited".into()), None, None, T0)
        .unwrap();
    let single = Plan::Single {
        title: "tight".into(),
        body: "b".into(),
        assignee: None,
    };
    let before = s.snapshot().unwrap();
    assert_eq!(
        s.commit_plan(&busy.id, &basis, Mode::Automatic, &single, &settings, T0)
            .unwrap_err(),
        StoreError::Refused(Refusal::InputChanged(busy.id.clone()))
    );
    assert_eq!(s.snapshot().unwrap(), before);
    let basis = PlanBasis::of(&s.facts(&busy.id).unwrap());
    let spec = s
        .commit_plan(&busy.id, &basis, Mode::Automatic, &single, &settings, T0)
        .unwrap();
    assert_eq!(
        (spec.root.status, spec.root.title.as_str()),
        (Status::Ready, "tight")
    );

    // Over the cap: rejected whole, nothing written.
    let wide = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("wide")
            },
            T0,
        )
        .unwrap();
    let basis = PlanBasis::of(&s.facts(&wide.id).unwrap());
    let huge = Plan::Fanout {
        rationale: None,
        tasks: (0..500).map(|i| planned(&format!("t{i}"), vec![])).collect(),
    };
    let before = s.snapshot().unwrap();
    let err = s
        .commit_plan(&wide.id, &basis, Mode::Manual, &huge, &settings, T0)
        .unwrap_err();
    assert!(
        err.to_string().contains("reply has 500 tasks, limit is 16"),
        "{err}"
    );
    assert_eq!(s.snapshot().unwrap(), before);

    // Failures back off, then park; a parked or cooling card is not due.
    let policy = crate::RetryPolicy::default();
    let t = s
        .record_decompose_failure(&wide.id, "HTTP 500", policy, 0.0, T0)
        .unwrap();
    assert_eq!(t.decompose_next_attempt_at, Some(T0 + 30));
    assert!(s.due_triage(T0 + 29, 10).unwrap().iter().all(|d| d.id != wide.id));
    assert!(s.due_triage(T0 + 30, 10).unwrap().iter().any(|d| d.id == wide.id));
    s.record_decompose_failure(&wide.id, "HTTP 500", policy, 0.0, T0 + 30)
        .unwrap();
    let t = s
        .record_decompose_failure(&wide.id, "HTTP 500", policy, 0.0, T0 + 90)
        .unwrap();
    assert!(t.decompose_parked);
    assert!(s
        .due_triage(T0 + 100_000, 10)
        .unwrap()
        .iter()
        .all(|d| d.id != wide.id));
    s.clear_decompose_failures(&wide.id, T0).unwrap();
    assert!(s.due_triage(T0, 10).unwrap().iter().any(|d| d.id == wide.id));
    assert_board_ok(&*s);
}

/// A card with execution history is never due and never committed automatically.
pub fn history_blocks_automatic_decomposition(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "ran before");
    for _ in 0..2 {
        s.claim(&t.id, 900, T0).unwrap();
        s.block(&t.id, Some(BlockKind::Capability), None, None, T0)
            .unwrap();
        if s.get(&t.id).unwrap().status == Status::Blocked {
            s.unblock(&t.id, None, T0).unwrap();
        }
    }
    assert_eq!(s.get(&t.id).unwrap().status, Status::Triage);
    assert!(s.due_triage(T0, 10).unwrap().is_empty());
    let facts = s.facts(&t.id).unwrap();
    let err = crate::plan::automatic_guard(&facts, T0).unwrap_err();
    assert!(err.to_string().contains("execution history"), "{err}");
    let single = Plan::Single {
        title: "again".into(),
        body: String::new(),
        assignee: None,
    };
    let basis = PlanBasis::of(&facts);
    let err = s
        .commit_plan(
            &t.id,
            &basis,
            Mode::Automatic,
            &single,
            &PlanSettings::default(),
            T0,
        )
        .unwrap_err();
    assert!(err.to_string().contains("gained execution history"), "{err}");
    let ok = s
        .commit_plan(&t.id, &basis, Mode::Manual, &single, &PlanSettings::default(), T0)
        .unwrap();
    assert_eq!(ok.root.status, Status::Ready);
}

/// Due cards come oldest due first: a card whose retry came due before a fresh card was
/// created goes before it, so fresh cards arriving all the time never hold a failing
/// card back from its next attempt (and its park).
pub fn due_cards_come_oldest_due_first(board: &dyn Backend) {
    let s = board.connect();
    let card = |title: &str, at| {
        let new = NewTask {
            triage: true,
            ..NewTask::titled(title)
        };
        s.create(&new, at).unwrap().id
    };
    let failing = card("failing", T0);
    let policy = crate::RetryPolicy::default();
    s.record_decompose_failure(&failing, "HTTP 500", policy, 0.0, T0)
        .unwrap();
    let early = card("fresh before the retry", T0 + 10);
    let late = card("fresh after the retry", T0 + 40);
    let due = s.due_triage(T0 + 50, 10).unwrap();
    let order: Vec<&TaskId> = due.iter().map(|t| &t.id).collect();
    assert_eq!(order, [&early, &failing, &late], "due at 10, 30 and 40");
    let first_two: Vec<TaskId> = s
        .due_triage(T0 + 50, 2)
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(first_two, [early, failing]);
}
