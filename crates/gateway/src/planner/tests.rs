//! The planner with plain values: one table row per action kind and per budget.

use board_core::graph::blank_task;
use board_core::{Ceilings, Lease, Offer, RetryPolicy, Spend, Status, TriageLease};

use super::*;

mod checks;
mod edges;
mod fencing;
mod recurring;

const T: Timestamp = 1_800_000_000;

fn id(n: u8) -> TaskId {
    TaskId::from_random([0, 0, 0, n])
}

fn task(n: u8, status: Status) -> Task {
    blank_task(id(n), format!("task {n}"), status, T - 100 + i64::from(n))
}

fn run(n: u8) -> RunRef {
    RunRef {
        run_id: i64::from(n),
        claim_lock: format!("lock {n}"),
    }
}

/// A running task on run `n`, started 10 s ago, its lease good for 900 s.
fn running(n: u8) -> Task {
    let mut t = task(n, Status::Running);
    t.lease = Some(Lease {
        run_id: i64::from(n),
        claim_lock: format!("lock {n}"),
        expires: T + 900,
        worker_pid: None,
        worker_host: None,
        last_heartbeat_at: None,
        lane: None,
    });
    t.started_at = Some(T - 10);
    t
}

fn with_runtime(mut t: Task, max: i64) -> Task {
    t.max_runtime_seconds = Some(max);
    t
}

fn expired(mut t: Task) -> Task {
    if let Some(lease) = t.lease.as_mut() {
        lease.expires = T - 1;
    }
    t
}

fn held(n: u8, observed: Observed) -> WorkerView {
    WorkerView {
        task: id(n),
        run: run(n),
        adopted: false,
        observed,
        stopping: None,
        run_ended: None,
        profile: Some("default".into()),
        since: T - 10,
    }
}

fn exited(code: i32) -> Observed {
    Observed::Exited {
        exit: Exit::Code(code),
        log_tail: "the end".into(),
    }
}

fn stopping(mut w: WorkerView, since: Timestamp) -> WorkerView {
    w.stopping = Some(Stopping {
        run: w.run.clone(),
        reason: StopReason::TimedOut { limit: 5 },
        since,
    });
    w
}

fn card(n: u8) -> TaskFacts {
    TaskFacts {
        task: task(n, Status::Triage),
        newest_run: None,
        run_count: 0,
        open_parents: 0,
        decomposed: false,
    }
}

/// A closed breaker that has seen the provider answer.
fn up() -> Breaker {
    Breaker {
        last_success_at: Some(T - 60),
        ..Breaker::default()
    }
}

fn settings() -> DispatchSettings {
    DispatchSettings {
        max_spawn: 2,
        commands: BTreeMap::from([
            ("default".to_owned(), Some(vec!["agent".to_owned()])),
            ("idle".to_owned(), None),
        ]),
        ..DispatchSettings::default()
    }
}

fn ready(n: u8) -> Task {
    task(n, Status::Ready)
}

fn idle(n: u8) -> Task {
    Task {
        assignee: Some("idle".into()),
        ..ready(n)
    }
}

/// Each action as its kind and the task it is about.
fn kinds(actions: &[Action]) -> Vec<(&'static str, TaskId)> {
    actions
        .iter()
        .map(|a| {
            let kind = match a {
                Action::Reap { .. } => "reap",
                Action::AutoComplete { .. } => "auto complete",
                Action::ReleaseAdopted { .. } => "release",
                Action::Stop { .. } => "stop",
                Action::Kill { .. } => "kill",
                Action::Disown { .. } => "disown",
                Action::LetGo { .. } => "let go",
                Action::EndRun { .. } => "end",
                Action::ExtendLease { .. } => "extend",
                Action::StartDecomposition { .. } => "decompose",
                Action::Promote { .. } => "promote",
                Action::Resume { .. } => "resume",
                Action::Recur { .. } => "recur",
                Action::EndRecurrence { .. } => "end recurrence",
                Action::SkipNonspawnable { .. } => "skip",
                Action::Spawn { .. } => "spawn",
                Action::NoteCeiling { .. } => "ceiling",
                Action::ReleaseDecomposition { .. } => "release lease",
                Action::TakeOverLease { .. } => "take over",
                Action::RememberFailure { .. } => "remember",
                Action::Claim { .. } => "claim",
            };
            (kind, a.tasks()[0].clone())
        })
        .collect()
}

fn planned(view: &View) -> Vec<(&'static str, TaskId)> {
    kinds(&plan(view, T, &settings()))
}

#[test]
fn an_exited_own_worker_is_reaped_with_its_exit_classified() {
    let view = View {
        workers: vec![held(1, exited(0)), held(2, exited(75)), held(3, Observed::Alive)],
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    let outcomes: Vec<Outcome> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Reap { ending, .. } => Some(ending.outcome),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, [Outcome::ProtocolViolation, Outcome::RateLimited]);
    let cooldowns: Vec<Option<Timestamp>> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Reap { cooldown_until, .. } => Some(*cooldown_until),
            _ => None,
        })
        .collect();
    assert_eq!(
        cooldowns,
        [None, Some(T + RATE_LIMIT_COOLDOWN_SECONDS)],
        "only the rate-limited task cools down"
    );
    let Action::Reap { ending, run: r, .. } = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!(r, &run(1));
    assert!(
        ending.error.as_deref().unwrap().contains("the end"),
        "quotes the log tail"
    );
}

#[test]
fn an_exited_adopted_worker_is_released_without_a_failure() {
    let mut w = held(1, exited(0));
    w.adopted = true;
    let view = View {
        workers: vec![w],
        ..View::default()
    };
    assert_eq!(planned(&view), [("release", id(1))]);
}

#[test]
fn a_worker_over_its_runtime_is_asked_to_stop_once() {
    let late = expired(with_runtime(running(1), 5));
    let view = View {
        workers: vec![held(1, Observed::Alive)],
        running: vec![late.clone()],
        expired: vec![late],
        ..View::default()
    };
    assert_eq!(planned(&view), [("stop", id(1))], "not extended as well");
}

#[test]
fn a_run_over_its_runtime_without_a_live_worker_times_out_now() {
    let view = View {
        running: vec![
            with_runtime(running(1), 5),
            with_runtime(running(2), 5),
            with_runtime(running(3), 60),
        ],
        proven: BTreeSet::from([id(2)]),
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(kinds(&actions), [("end", id(1)), ("stop", id(2))]);
    let Action::EndRun { ending, held, .. } = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!((ending.outcome, *held), (Outcome::TimedOut, false));
}

#[test]
fn a_stopping_worker_is_killed_after_its_grace_and_its_run_ends_once_it_is_gone() {
    let since = T - STOP_GRACE_SECONDS;
    let within = View {
        workers: vec![stopping(held(1, Observed::Alive), since)],
        ..View::default()
    };
    assert_eq!(planned(&within), [], "within the grace");
    let over = View {
        workers: vec![stopping(held(1, Observed::Alive), since - 1)],
        running: vec![with_runtime(running(1), 5)],
        ..View::default()
    };
    assert_eq!(planned(&over), [("kill", id(1))], "never ended while it lives");
    let gone = View {
        workers: vec![stopping(held(1, exited(143)), since - 1)],
        running: vec![with_runtime(running(1), 5)],
        ..View::default()
    };
    let actions = plan(&gone, T, &settings());
    let [Action::EndRun { ending, held, .. }] = &actions[..] else {
        panic!("{actions:?}")
    };
    assert_eq!((ending.outcome, *held), (Outcome::TimedOut, true));
    assert!(ending
        .error
        .as_deref()
        .unwrap()
        .contains("max_runtime_seconds (5 s); log tail: the end"));
}

#[test]
fn an_expired_lease_is_extended_for_its_live_worker_else_the_run_goes_stale() {
    let mut other_run = held(2, Observed::Alive);
    other_run.run = run(9);
    let view = View {
        workers: vec![held(1, Observed::Alive), other_run],
        expired: vec![expired(running(1)), expired(running(2)), expired(running(3))],
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(
        kinds(&actions),
        [("extend", id(1)), ("end", id(2)), ("end", id(3))],
        "a worker held for another run is not this run's"
    );
    let Action::EndRun { ending, .. } = &actions[2] else {
        panic!("{actions:?}")
    };
    assert_eq!(ending.outcome, Outcome::Stale);
    assert_eq!(
        ending.error.as_deref(),
        Some(&*format!("lease expired at {}", T - 1))
    );
}

fn expiring(mut t: Task) -> Task {
    if let Some(lease) = t.lease.as_mut() {
        lease.expires = T + 1;
    }
    t
}

#[test]
fn a_lease_about_to_expire_is_extended_early_for_a_held_worker_and_left_alone_otherwise() {
    let view = View {
        workers: vec![held(1, Observed::Alive)],
        expired: vec![expiring(running(1)), expiring(running(2))],
        ..View::default()
    };
    assert_eq!(kinds(&plan(&view, T, &settings())), [("extend", id(1))]);
}

#[test]
fn another_hosts_run_is_judged_by_its_lease_alone() {
    let over = with_runtime(running(1), 5);
    let view = View {
        running: vec![over.clone(), running(2)],
        expired: vec![expired(running(2))],
        // Proven or not, another host's worker is never signalled from here.
        foreign: BTreeSet::from([id(1), id(2)]),
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(
        kinds(&actions),
        [("end", id(2))],
        "no timeout of another host's run"
    );
    let Action::EndRun { ending, held, .. } = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!((ending.outcome, *held), (Outcome::Stale, false));
}

fn decomposing(per_tick: usize, concurrency: usize) -> DispatchSettings {
    DispatchSettings {
        auto_decompose_per_tick: per_tick,
        auto_decompose_concurrency: concurrency,
        ..settings()
    }
}

fn started(view: &View, s: &DispatchSettings) -> Vec<TaskId> {
    plan(view, T, s)
        .into_iter()
        .filter_map(|a| match a {
            Action::StartDecomposition { card, .. } => Some(card),
            _ => None,
        })
        .collect()
}

#[test]
fn decompositions_keep_the_per_tick_and_in_flight_limits() {
    let view = View {
        triage: (1..=5).map(card).collect(),
        breaker: up(),
        ..View::default()
    };
    assert_eq!(started(&view, &decomposing(2, 10)), [id(1), id(2)], "per tick");
    let busy = View {
        in_flight: BTreeSet::from([id(1), id(9)]),
        ..view.clone()
    };
    assert_eq!(
        started(&busy, &decomposing(5, 3)),
        [id(2)],
        "in flight, never twice"
    );
    assert_eq!(started(&busy, &decomposing(5, 2)), [], "in flight");
    let off = DispatchSettings {
        auto_decompose: false,
        ..decomposing(5, 5)
    };
    assert_eq!(started(&view, &off), []);
}

#[test]
fn the_backoff_skips_parked_cooling_and_run_cards_and_remembers_an_attempt() {
    let mut parked = card(1);
    parked.task.decompose_parked = true;
    let mut cooling = card(2);
    cooling.task.decompose_next_attempt_at = Some(T + 1);
    let mut history = card(3);
    history.run_count = 1;
    let policy = RetryPolicy::default();
    let floor = policy.floor_after_start(&card(4).task, None, T - 1);
    let view = View {
        triage: vec![parked, cooling, history, card(4), card(5)],
        breaker: up(),
        floors: BTreeMap::from([(id(4), floor)]),
        ..View::default()
    };
    let actions = plan(&view, T, &decomposing(5, 5));
    let [Action::StartDecomposition {
        card: c,
        floor,
        probe: false,
    }] = &actions[..]
    else {
        panic!("{actions:?}")
    };
    assert_eq!(c, &id(5));
    assert_eq!(*floor, policy.floor_after_start(&card(5).task, None, T));
}

#[test]
fn promotion_is_planned_only_when_there_is_something_to_promote() {
    let view = View {
        promotable: vec![id(1), id(2)],
        ..View::default()
    };
    assert_eq!(
        plan(&view, T, &settings()),
        [Action::Promote {
            tasks: vec![id(1), id(2)]
        }]
    );
    assert_eq!(planned(&View::default()), []);
}

#[test]
fn spawns_stop_at_max_spawn_counting_live_and_stopping_workers() {
    let claimable: Vec<Task> = (1..=4).map(ready).collect();
    let view = View {
        claimable: claimable.clone(),
        ..View::default()
    };
    assert_eq!(
        planned(&view),
        [("claim", id(1)), ("spawn", id(1)), ("spawn", id(2))]
    );
    let Action::Claim { offers } = &plan(&view, T, &settings())[0] else {
        panic!("the spawns are claimed first");
    };
    // Unassigned, they go to kanban.default_assignee, and their claims say so.
    let to_default = |n| Offer {
        assign: Some("default".to_owned()),
        ..Offer::work(id(n))
    };
    assert_eq!(
        offers,
        &[to_default(1), to_default(2)],
        "in one call, in claim order"
    );
    let assigned = View {
        claimable: vec![Task {
            assignee: Some("default".into()),
            ..ready(1)
        }],
        ..View::default()
    };
    let Action::Claim { offers } = &plan(&assigned, T, &settings())[0] else {
        panic!("the spawn is claimed first");
    };
    assert_eq!(
        offers,
        &[Offer::work(id(1))],
        "an assigned task keeps its assignee"
    );
    let busy = View {
        workers: vec![held(7, Observed::Alive), stopping(held(8, Observed::Alive), T)],
        claimable: claimable.clone(),
        ..View::default()
    };
    assert_eq!(planned(&busy), [], "a stopping worker keeps its slot");
    let freed = View {
        workers: vec![held(7, Observed::Alive), held(8, exited(1))],
        claimable,
        ..View::default()
    };
    assert_eq!(
        planned(&freed),
        [("reap", id(8)), ("claim", id(1)), ("spawn", id(1))],
        "a reaped worker frees its slot, and the claim comes after the reap"
    );
}

#[test]
fn a_rate_limited_task_cools_down_and_a_held_one_is_not_respawned() {
    let view = View {
        workers: vec![held(1, Observed::Alive)],
        claimable: vec![ready(1), ready(2), ready(3)],
        cooldown: BTreeMap::from([(id(2), T + 1)]),
        ..View::default()
    };
    assert_eq!(planned(&view), [("claim", id(3)), ("spawn", id(3))]);
    let later = plan(&view, T + 1, &settings());
    assert_eq!(
        kinds(&later),
        [("claim", id(2)), ("spawn", id(2))],
        "cooled down; one slot is held"
    );
}

#[test]
fn a_task_that_cannot_be_spawned_is_noted_once_and_left_ready() {
    let view = View {
        claimable: vec![idle(1), ready(2), idle(3)],
        skipped: BTreeSet::from([id(3)]),
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(
        kinds(&actions),
        [("skip", id(1)), ("claim", id(2)), ("spawn", id(2))]
    );
    assert!(matches!(&actions[0], Action::SkipNonspawnable { profile, .. } if profile == "idle"));
}

#[test]
fn the_preview_reports_a_plan_in_the_ticks_shape() {
    let late = with_runtime(running(2), 5);
    let view = View {
        workers: vec![held(1, exited(3)), held(2, Observed::Alive)],
        running: vec![late],
        expired: vec![expired(running(3))],
        triage: vec![card(4)],
        breaker: up(),
        promotable: vec![id(5)],
        due_scheduled: vec![id(7)],
        claimable: vec![ready(6)],
        ..View::default()
    };
    let actions = plan(&view, T, &decomposing(1, 1));
    let order: Vec<&str> = kinds(&actions).into_iter().map(|(k, _)| k).collect();
    let at = |kind| order.iter().position(|k| *k == kind).unwrap();
    assert!(
        at("resume") < at("promote"),
        "resumed tasks may be promoted: {order:?}"
    );
    let report = preview(&actions, 0);
    assert_eq!(report.resumed, [id(7)]);
    assert_eq!(report.reaped, [id(1)]);
    assert_eq!(report.timed_out, [id(2)]);
    assert_eq!(report.reclaimed, [id(3)]);
    assert_eq!(report.decompositions_started, [id(4)]);
    assert_eq!(report.decompositions_in_flight, 1);
    assert_eq!(report.promoted, [id(5)]);
    assert_eq!(report.spawned, [id(6)]);
}

fn probes(view: &View, s: &DispatchSettings) -> Vec<(TaskId, bool)> {
    plan(view, T, s)
        .into_iter()
        .filter_map(|a| match a {
            Action::StartDecomposition { card, probe, .. } => Some((card, probe)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_open_breaker_starts_nothing_until_its_probe_then_exactly_one() {
    let open = Breaker {
        open: true,
        probe_at: Some(T + 1),
        opens: 1,
        ..up()
    };
    let mut cooling = card(1);
    cooling.task.decompose_next_attempt_at = Some(T + 5);
    let floor = RetryPolicy::default().floor_after_start(&card(2).task, None, T - 1);
    let view = View {
        triage: vec![cooling, card(2), card(3)],
        floors: BTreeMap::from([(id(2), floor)]),
        breaker: open.clone(),
        ..View::default()
    };
    let s = decomposing(5, 5);
    assert_eq!(probes(&view, &s), [], "before the probe time");
    let due = View {
        breaker: Breaker {
            probe_at: Some(T),
            ..open
        },
        ..view
    };
    assert_eq!(
        probes(&due, &s),
        [(id(2), true)],
        "one probe, past this process's floor, never a cooling card"
    );
    let busy = View {
        in_flight: BTreeSet::from([id(9)]),
        ..due.clone()
    };
    assert_eq!(probes(&busy, &s), [], "never while a call is in flight");
    let suspected = View {
        breaker: Breaker {
            suspects: vec![id(2)],
            ..due.breaker.clone()
        },
        ..due.clone()
    };
    assert_eq!(
        probes(&suspected, &s),
        [(id(3), true)],
        "the probe skips a card suspected of failing by itself"
    );
    assert_eq!(
        allowance(&busy, T, &s).0,
        Allowance::Nothing("provider breaker open; a decomposition is still in flight".into())
    );
}

#[test]
fn an_auth_fault_lets_a_probe_through_only_once_the_config_changed() {
    let view = View {
        triage: vec![card(1)],
        breaker: Breaker {
            open: true,
            auth: true,
            probe_at: Some(T + 3000),
            config_stamp: Some("before".into()),
            ..up()
        },
        ..View::default()
    };
    let before = DispatchSettings {
        config_stamp: Some("before".into()),
        ..decomposing(5, 5)
    };
    assert_eq!(probes(&view, &before), []);
    let edited = DispatchSettings {
        config_stamp: Some("after".into()),
        ..before
    };
    assert_eq!(probes(&view, &edited), [(id(1), true)]);
}

#[test]
fn a_provider_in_doubt_gets_one_decomposition_at_a_time() {
    let view = View {
        triage: (1..=5).map(card).collect(),
        breaker: Breaker::default(),
        ..View::default()
    };
    let s = decomposing(5, 5);
    assert_eq!(started(&view, &s), [id(1)], "never seen up");
    let fault = View {
        breaker: Breaker {
            fault_card: Some(id(7)),
            ..up()
        },
        in_flight: BTreeSet::from([id(8)]),
        ..view.clone()
    };
    assert_eq!(started(&fault, &s), [], "an unexplained fault, one in flight");
    let first_failed = View {
        breaker: Breaker {
            fault_card: Some(id(1)),
            ..Breaker::default()
        },
        ..view.clone()
    };
    assert_eq!(
        started(&first_failed, &s),
        [id(2)],
        "the card whose fault put it in doubt waits while another is due"
    );
    let alone = View {
        triage: vec![card(1)],
        ..first_failed
    };
    assert_eq!(started(&alone, &s), [id(1)], "unless it is the only one");
}

#[test]
fn the_request_ceiling_bounds_what_starts_and_is_noted_once() {
    let ceilings = Ceilings {
        max_requests_per_day: Some(5),
        ..Ceilings::default()
    };
    let s = DispatchSettings {
        ceilings,
        ..decomposing(5, 5)
    };
    let spend = |requests| Spend {
        requests,
        ..Spend::default()
    };
    let view = View {
        triage: (1..=5).map(card).collect(),
        breaker: up(),
        spend: spend(3),
        in_flight: BTreeSet::from([id(9)]),
        ..View::default()
    };
    assert_eq!(started(&view, &s), [id(1)], "5 - 3 spent - 1 in flight");
    let full = View {
        spend: spend(5),
        in_flight: BTreeSet::new(),
        ..view.clone()
    };
    let reached = ceilings.reached(&spend(5));
    assert!(reached.is_some());
    assert_eq!(
        plan(&full, T, &s),
        [Action::NoteCeiling {
            card: id(1),
            reached: reached.clone()
        }]
    );
    let noted = View {
        breaker: Breaker {
            ceiling: reached,
            ..up()
        },
        ..full
    };
    assert_eq!(plan(&noted, T, &s), [], "noted once");
    let lifted = View {
        spend: spend(0),
        ..noted
    };
    assert_eq!(
        kinds(&plan(&lifted, T, &s))[..2],
        [("ceiling", id(1)), ("decompose", id(1))]
    );
}

#[test]
fn a_profiles_cap_counts_the_spawns_of_the_same_pass() {
    let mut capped = settings();
    capped.max_spawn = 4;
    capped.gates.insert(
        "default".to_owned(),
        Gates {
            max_concurrent: Some(2),
            ..Gates::default()
        },
    );
    let view = View {
        claimable: (1..=3).map(ready).collect(),
        ..View::default()
    };
    let spawned: Vec<TaskId> = kinds(&plan(&view, T, &capped))
        .into_iter()
        .filter(|(kind, _)| *kind == "spawn")
        .map(|(_, id)| id)
        .collect();
    assert_eq!(spawned, [id(1), id(2)], "two of default's, none over its cap");
}

#[test]
fn a_lanes_profile_is_never_spawned_nor_noted_as_unrunnable() {
    let mut lanes = settings();
    lanes.external = vec!["idle".to_owned()];
    let view = View {
        claimable: vec![idle(1)],
        ..View::default()
    };
    assert_eq!(planned(&view), [("skip", id(1))], "without the lane, noted once");
    assert!(plan(&view, T, &lanes).is_empty(), "a lane's work is the lane's");
}

#[test]
fn a_later_passes_report_adds_to_the_first() {
    let mut first = TickReport {
        resumed: vec![id(1)],
        promoted: vec![id(2)],
        ..TickReport::default()
    };
    first.absorb(TickReport {
        reaped: vec![id(3)],
        resumed: vec![id(4)],
        spawned: vec![id(5)],
        errors: vec!["late".into()],
        ..TickReport::default()
    });
    assert_eq!(
        (
            first.resumed,
            first.promoted,
            first.reaped,
            first.spawned,
            first.errors
        ),
        (
            vec![id(1), id(4)],
            vec![id(2)],
            vec![id(3)],
            vec![id(5)],
            vec!["late".to_owned()]
        )
    );
}
