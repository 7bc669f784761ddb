//! A card and its plan made at once (a template's swarm): the whole graph lands in one
//! transaction, routed and linked, or nothing does.

use super::{assert_board_ok, Backend, T0};
use crate::plan::{Plan, PlanSettings, PlannedTask};
use crate::store::StoreError;
use crate::types::Status;
use crate::{NewTask, Refusal};

fn planned(title: &str, assignee: &str, parents: &[usize]) -> PlannedTask {
    PlannedTask {
        title: title.into(),
        body: String::new(),
        assignee: assignee.into(),
        parents: parents.to_vec(),
    }
}

pub fn a_card_and_its_plan_land_together_or_not_at_all(board: &dyn Backend) {
    let s = board.connect();
    let root = NewTask {
        triage: true,
        ..NewTask::titled("write up the findings")
    };
    let plan = Plan::Fanout {
        rationale: None,
        tasks: vec![
            planned("research a", "researcher", &[]),
            planned("research b", "researcher", &[]),
            planned("verify", "reviewer", &[0, 1]),
        ],
    };
    let settings = PlanSettings {
        orchestrator: "writer".into(),
        ..PlanSettings::default()
    };
    let made = s.create_planned(&root, &plan, &settings, T0).unwrap();
    assert_eq!(
        (made.root.status, made.root.assignee.as_deref()),
        (Status::Todo, Some("writer"))
    );
    assert_eq!(made.child_ids.len(), 3);
    let statuses: Vec<(Status, Option<String>)> = made
        .child_ids
        .iter()
        .map(|id| {
            let t = s.get(id).unwrap();
            (t.status, t.assignee)
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (Status::Ready, Some("researcher".into())),
            (Status::Ready, Some("researcher".into())),
            (Status::Todo, Some("reviewer".into())),
        ]
    );
    let verify_parents: Vec<_> = s
        .parents(&made.child_ids[2])
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(verify_parents.len(), 2);
    assert_eq!(
        s.parents(&made.root.id).unwrap().len(),
        3,
        "the card waits for every step"
    );

    let before = s.snapshot().unwrap();
    let bad = Plan::Fanout {
        rationale: None,
        tasks: vec![planned("waits for nothing there", "x", &[5])],
    };
    for (root, plan) in [
        (root.clone(), bad),
        (
            NewTask {
                triage: false,
                ..root.clone()
            },
            plan.clone(),
        ),
        (
            NewTask {
                idempotency_key: Some("k".into()),
                ..root.clone()
            },
            plan,
        ),
    ] {
        assert!(matches!(
            s.create_planned(&root, &plan, &settings, T0 + 1),
            Err(StoreError::Refused(Refusal::InvalidPlan(_) | Refusal::Invalid(_)))
        ));
    }
    assert_eq!(s.snapshot().unwrap(), before, "a refused graph writes nothing");
    assert_board_ok(&*s);
}
