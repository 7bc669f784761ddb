//! Lanes (docs/lanes.md): a lane claims only its profiles' ready tasks, in claim order,
//! up to its cap; its run carries its name; a revoked lane claims nothing; and lanes and
//! gateways racing for the same tasks each take a task once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use super::races::StartLine;
use super::{assert_board_ok, event_kinds, Backend, T0};
use crate::lanes::{token_from, token_hash, Lane, LaneClaim};
use crate::refusal::Refusal;
use crate::store::{Completion, Offer, RunEnd, Store, StoreError};
use crate::types::{Checks, Outcome, Status, Task, TaskId};
use crate::NewTask;

fn lane(store: &dyn Store, name: &str, profiles: &[&str]) -> String {
    let mut random = [0u8; 32];
    for (slot, byte) in random.iter_mut().zip(name.bytes()) {
        *slot = byte;
    }
    let token = token_from(random);
    let profiles: Vec<String> = profiles.iter().map(|p| p.to_string()).collect();
    let lane = Lane::new(name, &profiles, &token, T0).expect("a lane");
    store.create_lane(&lane).expect("create lane");
    token
}

fn task_of(store: &dyn Store, title: &str, profile: &str, priority: i64) -> Task {
    let request = NewTask {
        assignee: Some(profile.to_owned()),
        priority,
        ..NewTask::titled(title)
    };
    store.create(&request, T0).expect("create")
}

fn no_checks(_: &Task) -> Checks {
    Checks::default()
}

fn claim(store: &dyn Store, name: &str, max_held: u64, now: i64) -> Result<Option<Task>, StoreError> {
    match store.claim_for_lane(name, 60, max_held, &no_checks, now)? {
        LaneClaim::Claimed(c) => Ok(Some(c.task)),
        LaneClaim::Nothing => Ok(None),
    }
}

/// A lane is kept by name and by its token's digest, never the token; a name is taken
/// once; revoking keeps the lane, refused from then on.
pub fn lanes_are_kept_by_digest_and_revoked(board: &dyn Backend) {
    let s = board.connect();
    let token = lane(s.as_ref(), "ci", &["coder", "tester"]);
    let found = s
        .lane_by_token(&token_hash(&token))
        .unwrap()
        .expect("found by digest");
    assert_eq!((found.name.as_str(), found.profiles.len()), ("ci", 2));
    assert_ne!(found.token_hash, token, "the token itself is not stored");
    assert!(s.lane_by_token(&token_hash("kl_wrong")).unwrap().is_none());
    let again = Lane::new("ci", &["coder".into()], "kl_other", T0).unwrap();
    assert!(matches!(
        s.create_lane(&again),
        Err(StoreError::Refused(Refusal::LaneExists(_)))
    ));
    let revoked = s.revoke_lane("ci", T0 + 5).unwrap();
    assert_eq!(revoked.revoked_at, Some(T0 + 5));
    assert_eq!(
        s.revoke_lane("ci", T0 + 9).unwrap().revoked_at,
        Some(T0 + 5),
        "revoked once"
    );
    assert!(matches!(
        s.revoke_lane("nope", T0),
        Err(StoreError::Refused(Refusal::NoSuchLane(_)))
    ));
    task_of(s.as_ref(), "work", "coder", 0);
    let refused = claim(s.as_ref(), "ci", 4, T0 + 10);
    assert!(
        matches!(refused, Err(StoreError::Refused(Refusal::LaneRevoked(_)))),
        "{refused:?}"
    );
    assert!(matches!(
        claim(s.as_ref(), "nope", 4, T0),
        Err(StoreError::Refused(Refusal::NoSuchLane(_)))
    ));
    s.see_lane("ci", Some(T0 + 70), T0 + 11).unwrap();
    let stats = s.lane_stats().unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (stats[0].lane.last_seen_at, stats[0].lane.waiting_until),
        (Some(T0 + 11), Some(T0 + 70))
    );
    assert_board_ok(s.as_ref());
}

/// A lane claims its profiles' ready tasks in claim order (priority, then age) and no
/// other profile's, up to its cap; its run carries its name and the checks it was given.
pub fn a_lane_claims_its_profiles_work_in_order_up_to_its_cap(board: &dyn Backend) {
    let s = board.connect();
    lane(s.as_ref(), "ext", &["coder"]);
    let other = task_of(s.as_ref(), "not ours", "writer", 9);
    let low = task_of(s.as_ref(), "low", "coder", 0);
    let high = task_of(s.as_ref(), "high", "coder", 5);
    let third = task_of(s.as_ref(), "third", "coder", 0);
    let checked = |_: &Task| Checks {
        verify: true,
        ..Checks::default()
    };
    let first = match s.claim_for_lane("ext", 60, 2, &checked, T0 + 1).unwrap() {
        LaneClaim::Claimed(c) => c,
        LaneClaim::Nothing => panic!("a ready task of its profile"),
    };
    assert_eq!(first.task.id, high.id, "priority first");
    assert_eq!(first.task.lane(), Some("ext"));
    let runs = s.runs(&high.id).unwrap();
    assert_eq!(
        (runs[0].lane.as_deref(), runs[0].checks.verify),
        (Some("ext"), true)
    );
    let payload = &s
        .events(&Default::default())
        .unwrap()
        .into_iter()
        .rev()
        .find(|e| e.kind == "claimed");
    assert_eq!(
        payload.as_ref().unwrap().payload["lane"],
        "ext",
        "the claim event names the lane"
    );
    assert_eq!(
        claim(s.as_ref(), "ext", 2, T0 + 2).unwrap().unwrap().id,
        low.id,
        "then age"
    );
    let full = claim(s.as_ref(), "ext", 2, T0 + 3);
    assert!(
        matches!(full, Err(StoreError::Refused(Refusal::LaneFull { held: 2, .. }))),
        "{full:?}"
    );
    let done = Completion {
        expected_run_id: Some(first.run_id),
        ..Completion::default()
    };
    assert!(s.complete(&high.id, &done, T0 + 4).unwrap());
    assert_eq!(
        claim(s.as_ref(), "ext", 2, T0 + 5).unwrap().unwrap().id,
        third.id,
        "room again"
    );
    assert_eq!(
        claim(s.as_ref(), "ext", 3, T0 + 6).unwrap(),
        None,
        "nothing of its profiles"
    );
    assert_eq!(
        s.get(&other.id).unwrap().status,
        Status::Ready,
        "another profile's task is left"
    );
    let stats = s.lane_stats().unwrap();
    assert_eq!((stats[0].held, stats[0].done, stats[0].failed), (2, 1, 0));
    let gateway = s.claimable_except(10, &["coder".to_owned()]).unwrap();
    assert!(gateway.iter().all(|t| t.assignee.as_deref() != Some("coder")));
    assert_board_ok(s.as_ref());
}

/// A lane's run that lapses is ended as any run is, counts as the lane's failure, and
/// the task goes to the next claimer; the lane's late report loses to the run guard.
pub fn a_lapsed_lane_run_goes_to_the_next_claimer(board: &dyn Backend) {
    let s = board.connect();
    lane(s.as_ref(), "a", &["coder"]);
    lane(s.as_ref(), "bb", &["coder"]);
    let task = task_of(s.as_ref(), "work", "coder", 0);
    let held = s.claim_for_lane("a", 60, 4, &no_checks, T0).unwrap();
    let LaneClaim::Claimed(first) = held else {
        panic!("claimed")
    };
    assert!(!s.heartbeat(&task.id, first.run_id + 1, 60, None, T0 + 1).unwrap());
    assert!(s.heartbeat(&task.id, first.run_id, 60, None, T0 + 30).unwrap());
    let lapsed = s.expired_leases(T0 + 100, 10).unwrap();
    assert_eq!(lapsed.len(), 1);
    let end = RunEnd {
        run_id: first.run_id,
        claim_lock: first.claim_lock.clone(),
        outcome: Outcome::Stale,
        error: Some("lease expired".into()),
        detail: serde_json::json!({}),
        failure_limit: 3,
    };
    assert!(s.end_run(&task.id, end, T0 + 100).unwrap());
    assert_eq!(claim(s.as_ref(), "bb", 4, T0 + 101).unwrap().unwrap().id, task.id);
    let late = Completion {
        expected_run_id: Some(first.run_id),
        ..Completion::default()
    };
    assert!(
        !s.complete(&task.id, &late, T0 + 102).unwrap(),
        "the late report is refused"
    );
    let stats = s.lane_stats().unwrap();
    let a = stats.iter().find(|l| l.lane.name == "a").unwrap();
    assert_eq!(
        (a.held, a.done, a.failed, a.last_heartbeat_at),
        (0, 0, 1, Some(T0 + 30))
    );
    assert!(
        event_kinds(s.as_ref(), &task.id)
            .iter()
            .filter(|k| *k == "claimed")
            .count()
            == 2
    );
    assert_board_ok(s.as_ref());
}

/// Lanes and gateways race for the same tasks on separate connections: every task is
/// claimed once, by exactly one of them.
pub fn lanes_and_gateways_claim_each_task_once(board: &dyn Backend, tasks: usize) {
    let s = board.connect();
    let lanes = ["l1", "l2", "l3"];
    for name in lanes {
        lane(s.as_ref(), name, &["coder"]);
    }
    let ids: Vec<TaskId> = (0..tasks)
        .map(|i| task_of(s.as_ref(), &format!("t{i}"), "coder", (i % 3) as i64).id)
        .collect();
    let start = Arc::new(StartLine::new(lanes.len() + 2));
    let won: Arc<Mutex<Vec<(TaskId, String)>>> = Arc::default();
    let mut handles = Vec::new();
    for name in lanes {
        let (store, start, won) = (board.connect(), start.clone(), won.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            while let Ok(LaneClaim::Claimed(c)) = store.claim_for_lane(name, 60, u64::MAX, &no_checks, T0) {
                won.lock().unwrap().push((c.task.id, name.to_owned()));
            }
        }));
    }
    for gateway in ["gw-1", "gw-2"] {
        let (store, start, won, ids) = (board.connect(), start.clone(), won.clone(), ids.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            for chunk in ids.chunks(4) {
                let offers: Vec<Offer> = chunk.iter().cloned().map(Offer::work).collect();
                for c in store.claim_ready(&offers, 60, Some(gateway), T0).unwrap() {
                    won.lock().unwrap().push((c.task.id, gateway.to_owned()));
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let won = won.lock().unwrap();
    let unique: BTreeSet<&TaskId> = won.iter().map(|(id, _)| id).collect();
    assert_eq!(unique.len(), won.len(), "a task claimed twice: {won:?}");
    assert_eq!(unique.len(), tasks, "every task claimed");
    for (id, by) in won.iter() {
        let t = s.get(id).unwrap();
        let holder = t.lane().or(t.worker_host()).unwrap_or_default();
        assert_eq!(holder, by, "{id} is held by its winner");
    }
    let stats = s.lane_stats().unwrap();
    let held: u64 = stats.iter().map(|l| l.held).sum();
    assert_eq!(
        held as usize,
        won.iter().filter(|(_, by)| by.starts_with('l')).count()
    );
    assert_board_ok(s.as_ref());
}
