//! Scenarios of Hermes' per-task fields: a tenant that lists and events select by and
//! a decomposition's children inherit, skills kept in order, a task's own failure
//! limit, and the default assignee a claim writes on an unassigned task.

use super::{assert_board_ok, Backend, T0};
use crate::plan::{Mode, Plan, PlanBasis, PlanSettings, PlannedTask};
use crate::store::{Offer, RunEnd, StoreError};
use crate::types::{Outcome, Status, TaskId, TaskOrder};
use crate::{EventFilter, NewTask, Refusal, Task, TaskFilter};

fn of_tenant(title: &str, tenant: &str) -> NewTask {
    NewTask {
        tenant: Some(tenant.into()),
        ..NewTask::titled(title)
    }
}

fn ids(tasks: Vec<Task>) -> Vec<TaskId> {
    tasks.into_iter().map(|t| t.id).collect()
}

/// A tenant is kept and selects tasks in every order and page of `list`, and events by
/// their task's tenant; skills are kept trimmed, once each, in order.
pub fn tenants_select_tasks_and_events(board: &dyn Backend) {
    let s = board.connect();
    let first = s
        .create(
            &NewTask {
                skills: vec![
                    "translation".into(),
                    " review ".into(),
                    "translation".into(),
                    String::new(),
                ],
                priority: 1,
                ..of_tenant("first", "acme")
            },
            T0,
        )
        .unwrap();
    assert_eq!(first.tenant.as_deref(), Some("acme"));
    assert_eq!(s.get(&first.id).unwrap().skills, vec!["translation", "review"]);
    let other = s.create(&of_tenant("other", "globex"), T0 + 1).unwrap();
    let none = s.create(&NewTask::titled("nobody's"), T0 + 2).unwrap();
    let second = s.create(&of_tenant("second", "acme"), T0 + 3).unwrap();
    assert!(s.get(&none.id).unwrap().skills.is_empty());
    let acme = |order: TaskOrder, limit: Option<usize>, after: Option<TaskId>| TaskFilter {
        tenant: Some("acme".into()),
        order,
        limit,
        after,
        ..TaskFilter::default()
    };
    let both = vec![first.id.clone(), second.id.clone()];
    assert_eq!(ids(s.list(&acme(TaskOrder::Priority, None, None)).unwrap()), both);
    assert_eq!(ids(s.list(&acme(TaskOrder::Title, None, None)).unwrap()), both);
    // Claim order's cursor reads its two ranges: the page after `first` is `second`.
    let page = s
        .list(&acme(TaskOrder::Priority, Some(1), Some(first.id.clone())))
        .unwrap();
    assert_eq!(ids(page), vec![second.id.clone()]);
    let page = s
        .list(&acme(TaskOrder::Created, Some(5), Some(first.id.clone())))
        .unwrap();
    assert_eq!(ids(page), vec![second.id.clone()]);
    let ready_globex = TaskFilter {
        tenant: Some("globex".into()),
        status: Some(Status::Ready),
        ..TaskFilter::default()
    };
    assert_eq!(ids(s.list(&ready_globex).unwrap()), vec![other.id.clone()]);
    s.comment(&other.id, None, "for globex", None, T0 + 4).unwrap();
    let events = EventFilter {
        tenant: Some("globex".into()),
        ..EventFilter::default()
    };
    let seen: Vec<TaskId> = s
        .events(&events)
        .unwrap()
        .into_iter()
        .map(|e| e.task_id)
        .collect();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|id| *id == other.id), "{seen:?}");
    assert_eq!(s.count_events(&events).unwrap(), seen.len() as u64);
    let newest = EventFilter {
        limit: Some(1),
        newest: true,
        ..events
    };
    assert_eq!(s.events(&newest).unwrap()[0].task_id, other.id);
    assert_board_ok(&*s);
}

/// A task's `max_retries` gives it up sooner (or later) than the board's limit.
pub fn a_tasks_own_retry_limit_wins(board: &dyn Backend) {
    let s = board.connect();
    let with_retries = |title: &str, n: i64| {
        let request = NewTask {
            max_retries: Some(n),
            ..NewTask::titled(title)
        };
        s.create(&request, T0).unwrap()
    };
    let (strict, patient) = (with_retries("strict", 1), with_retries("patient", 3));
    let crash = |id: &TaskId| {
        let c = s.claim(id, 900, T0).unwrap();
        let end = RunEnd {
            run_id: c.run_id,
            claim_lock: c.claim_lock,
            outcome: Outcome::Crashed,
            error: Some("boom".into()),
            detail: serde_json::json!({}),
            failure_limit: 2,
        };
        assert!(s.end_run(id, end, T0).unwrap());
        s.get(id).unwrap().status
    };
    assert_eq!(crash(&strict.id), Status::Blocked, "one failure of one allowed");
    assert_eq!(
        (crash(&patient.id), crash(&patient.id)),
        (Status::Ready, Status::Ready)
    );
    assert_eq!(crash(&patient.id), Status::Blocked);
    assert_eq!(s.get(&patient.id).unwrap().consecutive_failures, 3);
    assert_board_ok(&*s);
}

/// Fields a task cannot carry are refused and nothing is written; a decomposition's
/// children inherit the card's tenant.
pub fn bad_hermes_fields_are_refused_and_children_inherit_the_tenant(board: &dyn Backend) {
    let s = board.connect();
    let refused = |request: NewTask| match s.create(&request, T0) {
        Err(StoreError::Refused(Refusal::Invalid(why))) => why,
        other => panic!("{request:?} was not refused: {other:?}"),
    };
    let skills = |names: &[&str]| NewTask {
        skills: names.iter().map(|n| (*n).to_owned()).collect(),
        ..NewTask::titled("skilled")
    };
    assert!(refused(skills(&["a,b"])).contains("repeat --skill"));
    refused(skills(&["--load-everything"]));
    refused(skills(&["../etc"]));
    refused(skills(&["two words"]));
    let many: Vec<String> = (0..17).map(|i| format!("s{i}")).collect();
    refused(NewTask {
        skills: many,
        ..NewTask::titled("many")
    });
    refused(of_tenant("blank", "  "));
    refused(of_tenant("escape", "a\x1b[2Jb"));
    refused(of_tenant("long", &"t".repeat(300)));
    assert!(refused(NewTask {
        max_retries: Some(0),
        ..NewTask::titled("never")
    })
    .contains("at least 1"));
    assert!(
        s.list(&TaskFilter::default()).unwrap().is_empty(),
        "nothing written"
    );

    let card = s
        .create(
            &NewTask {
                triage: true,
                ..of_tenant("rough idea", "acme")
            },
            T0,
        )
        .unwrap();
    let basis = PlanBasis::of(&s.facts(&card.id).unwrap());
    let child = |title: &str| PlannedTask {
        title: title.into(),
        body: String::new(),
        assignee: "default".into(),
        parents: vec![],
    };
    let plan = Plan::Fanout {
        rationale: None,
        tasks: vec![child("one"), child("two")],
    };
    let settings = PlanSettings {
        orchestrator: "lead".into(),
        ..PlanSettings::default()
    };
    let committed = s
        .commit_plan(&card.id, &basis, Mode::Manual, &plan, &settings, T0 + 1)
        .unwrap();
    for id in &committed.child_ids {
        assert_eq!(s.get(id).unwrap().tenant.as_deref(), Some("acme"));
    }
    assert_board_ok(&*s);
}

/// A claim that names the profile taking an unassigned task's work assigns the task to
/// it, with an `assigned` event, in the claim's transaction; an assigned task keeps its
/// assignee, and the claim's run is the task's profile's.
pub fn a_claim_gives_an_unassigned_task_to_its_profile(board: &dyn Backend) {
    let s = board.connect();
    let lone = s.create(&NewTask::titled("nobody's"), T0).unwrap();
    let owned = s
        .create(
            &NewTask {
                assignee: Some("coder".into()),
                ..NewTask::titled("coder's")
            },
            T0,
        )
        .unwrap();
    let offer = |id: &TaskId| Offer {
        assign: Some("default".into()),
        ..Offer::work(id.clone())
    };
    let claimed = s
        .claim_ready(&[offer(&lone.id), offer(&owned.id)], 60, None, T0 + 1)
        .unwrap();
    assert_eq!(claimed.len(), 2);
    assert_eq!(s.get(&lone.id).unwrap().assignee.as_deref(), Some("default"));
    assert_eq!(s.get(&owned.id).unwrap().assignee.as_deref(), Some("coder"));
    assert_eq!(s.runs(&lone.id).unwrap()[0].profile.as_deref(), Some("default"));
    let assigned = EventFilter {
        task_id: Some(lone.id.clone()),
        kinds: vec!["assigned".into()],
        ..EventFilter::default()
    };
    let events = s.events(&assigned).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].payload["to"], "default");
    assert_eq!(events[0].payload["source"], "kanban.default_assignee");
    let mine = TaskFilter {
        assignee: Some("default".into()),
        ..TaskFilter::default()
    };
    assert_eq!(ids(s.list(&mine).unwrap()), vec![lone.id.clone()]);
    assert_board_ok(&*s);
}
