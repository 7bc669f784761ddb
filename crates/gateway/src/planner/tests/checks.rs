//! What starts for work waiting for a check (docs/board.md#checks): a verification as the
//! task's profile, a review as its reviewer, each before ready work, within the caps; and
//! the `auto` contract's completion of a worker that exits 0 with output.

use super::*;

fn gated() -> DispatchSettings {
    let gates = Gates {
        verify: vec![vec!["make".into(), "test".into()]],
        review: true,
        reviewer: Some("critic".into()),
        evidence: true,
        ..Gates::default()
    };
    DispatchSettings {
        max_spawn: 4,
        commands: BTreeMap::from([
            ("default".to_owned(), Some(vec!["agent".to_owned()])),
            ("critic".to_owned(), Some(vec!["review".to_owned()])),
            ("silent".to_owned(), None),
        ]),
        gates: BTreeMap::from([("default".to_owned(), gates)]),
        verifier: Some(vec!["kanban".into(), "verify".into()]),
        ..DispatchSettings::default()
    }
}

fn waiting(n: u8, status: Status, reviewer: Option<&str>) -> Task {
    Task {
        assignee: Some("default".into()),
        reviewer: reviewer.map(str::to_owned),
        ..task(n, status)
    }
}

fn spawns(actions: &[Action]) -> Vec<(TaskId, String, RunKind, usize)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Spawn {
                task,
                profile,
                kind,
                verifiers,
                ..
            } => Some((task.id.clone(), profile.clone(), *kind, verifiers.len())),
            _ => None,
        })
        .collect()
}

#[test]
fn checks_start_before_ready_work_each_as_its_own_kind_of_run() {
    let view = View {
        checkable: vec![
            waiting(1, Status::Verifying, None),
            waiting(2, Status::Review, Some("critic")),
        ],
        claimable: vec![waiting(3, Status::Ready, None)],
        ..View::default()
    };
    let actions = plan(&view, T, &gated());
    assert_eq!(
        spawns(&actions),
        [
            (id(1), "default".to_owned(), RunKind::Verify, 1),
            (id(2), "critic".to_owned(), RunKind::Review, 0),
            (id(3), "default".to_owned(), RunKind::Work, 0),
        ]
    );
    let Action::Claim { offers } = &actions[0] else {
        panic!("claimed first: {actions:?}");
    };
    let kinds: Vec<RunKind> = offers.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, [RunKind::Verify, RunKind::Review, RunKind::Work]);
    let work = &offers[2].checks;
    assert_eq!(
        (work.verify, work.review, work.reviewer.as_deref(), work.evidence),
        (true, true, Some("critic"), true),
        "a work run's checks come from its profile"
    );
    let Action::Spawn { command, .. } = &actions[1] else {
        panic!("{actions:?}");
    };
    assert_eq!(
        command,
        &["kanban", "verify"],
        "the verifier is the verify run's worker"
    );
}

#[test]
fn a_task_s_own_verifiers_replace_its_profile_s() {
    let mut own = waiting(1, Status::Ready, None);
    own.verify = Some(Vec::new());
    let view = View {
        claimable: vec![own],
        ..View::default()
    };
    let Action::Claim { offers } = &plan(&view, T, &gated())[0] else {
        panic!("a claim");
    };
    assert!(
        !offers[0].checks.verify,
        "--no-verify: no verifiers, no verification"
    );
}

#[test]
fn reviews_wait_for_a_person_or_a_reviewer_with_a_command() {
    let settings = gated();
    let view = View {
        checkable: vec![
            waiting(1, Status::Review, None),
            waiting(2, Status::Review, Some("default")),
            waiting(3, Status::Review, Some("silent")),
        ],
        ..View::default()
    };
    assert_eq!(
        planned_with(&view, &settings),
        [("skip", id(3))],
        "no reviewer, or the worker's own profile: a person reviews; a reviewer without a command is noted"
    );
    let no_verifier = DispatchSettings {
        verifier: None,
        ..gated()
    };
    let verifying = View {
        checkable: vec![waiting(4, Status::Verifying, None)],
        ..View::default()
    };
    assert_eq!(
        planned_with(&verifying, &no_verifier),
        [],
        "left to a gateway that can verify"
    );
}

#[test]
fn a_profile_s_max_concurrent_caps_its_workers_and_reviews() {
    let mut settings = gated();
    settings.gates.insert(
        "critic".to_owned(),
        Gates {
            max_concurrent: Some(1),
            ..Gates::default()
        },
    );
    let reviewing = WorkerView {
        profile: Some("critic".into()),
        ..held(9, Observed::Alive)
    };
    let view = View {
        workers: vec![reviewing],
        checkable: vec![
            waiting(1, Status::Review, Some("critic")),
            waiting(2, Status::Verifying, None),
        ],
        ..View::default()
    };
    let started: Vec<TaskId> = spawns(&plan(&view, T, &settings))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(started, [id(2)], "the critic is at its cap; others go on");
}

#[test]
fn an_auto_contract_completes_an_exit_0_with_output_and_nothing_else() {
    let mut settings = gated();
    settings.gates.insert(
        "default".to_owned(),
        Gates {
            auto: true,
            ..Gates::default()
        },
    );
    let silent = Observed::Exited {
        exit: Exit::Code(0),
        log_tail: "  \n".into(),
    };
    let view = View {
        workers: vec![held(1, exited(0)), held(2, exited(1)), held(3, silent)],
        ..View::default()
    };
    assert_eq!(
        planned_with(&view, &settings),
        [("auto complete", id(1)), ("reap", id(2)), ("reap", id(3))]
    );
    let plain = View {
        workers: vec![held(1, exited(0))],
        ..View::default()
    };
    assert_eq!(
        planned(&plain),
        [("reap", id(1))],
        "without the contract: a protocol violation"
    );
}

fn planned_with(view: &View, settings: &DispatchSettings) -> Vec<(&'static str, TaskId)> {
    kinds(&plan(view, T, settings))
}
