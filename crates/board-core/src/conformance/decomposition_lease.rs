//! What several gateways sharing a board rely on, as every store keeps it: the
//! decomposition lease (one holder at a time, a leased card not due for anyone, a lapsed
//! or abandoned lease taken over and reported, one winner among threads leasing the same
//! card on separate connections), an automatic commit only under its live lease, and
//! `claim_ready` of named tasks.

use std::sync::{Arc, Barrier};

use super::{Backend, T0};
use crate::plan::{Mode, Plan, PlanBasis, PlanSettings};
use crate::store::{DecompositionLease, Offer, Store, StoreError, TriageLease};
use crate::{NewTask, Refusal, TaskId};

fn due(s: &dyn Store, at: i64, card: &TaskId) -> bool {
    s.due_triage(at, 100).unwrap().iter().any(|t| &t.id == card)
}

/// A card leased to one holder is due for nobody until the lease is released or lapses.
pub fn decomposition_lease_holds_a_card(board: &dyn Backend) {
    let s = board.connect();
    let card = NewTask {
        triage: true,
        ..NewTask::titled("lease me")
    };
    let card = s.create(&card, T0).unwrap().id;
    assert!(due(&*s, T0, &card));
    assert_eq!(
        s.lease_decomposition(&card, "a/1", 60, T0, None).unwrap(),
        DecompositionLease::Leased
    );
    assert!(!due(&*s, T0 + 59, &card), "a leased card is not due");
    assert_eq!(
        s.lease_decomposition(&card, "b/2", 60, T0 + 1, None).unwrap(),
        DecompositionLease::Held {
            holder: "a/1".into(),
            expires: T0 + 60
        }
    );
    s.release_decomposition(&card, "b/2").unwrap();
    assert!(
        !due(&*s, T0 + 2, &card),
        "another holder's release changes nothing"
    );
    assert!(due(&*s, T0 + 60, &card), "a lapsed lease holds nothing");
    assert_eq!(
        s.lease_decomposition(&card, "b/2", 60, T0 + 60, None).unwrap(),
        DecompositionLease::Lapsed { holder: "a/1".into() }
    );
    s.release_decomposition(&card, "a/1").unwrap();
    assert!(
        !due(&*s, T0 + 61, &card),
        "the lapsed holder cannot release the new lease"
    );
    assert_eq!(
        s.lease_decomposition(&card, "c/3", 60, T0 + 62, Some("b/2"))
            .unwrap(),
        DecompositionLease::Lapsed { holder: "b/2".into() },
        "a holder known to be gone loses its lease at once"
    );
    let leases = s.triage_leases(10).unwrap();
    assert_eq!(
        leases,
        [TriageLease {
            card: card.clone(),
            holder: "c/3".into(),
            expires: T0 + 122
        }],
        "the leases on triage cards, with their holders"
    );
    s.release_decomposition(&card, "c/3").unwrap();
    assert!(due(&*s, T0 + 63, &card));
    assert_eq!(s.triage_leases(10).unwrap(), [], "a released lease is gone");
    let task = s.create(&NewTask::titled("not a card"), T0).unwrap().id;
    s.lease_decomposition(&task, "d/4", 60, T0, None).unwrap();
    s.lease_decomposition(&card, "d/4", 1, T0, None).unwrap();
    let lapsed = s.triage_leases(10).unwrap();
    assert_eq!(
        lapsed.iter().map(|l| (&l.card, l.expires)).collect::<Vec<_>>(),
        [(&card, T0 + 1)],
        "a lapsed lease is listed, one on a card out of triage is not"
    );
    assert_eq!(s.triage_leases(0).unwrap(), [], "at most the limit");
    s.release_decomposition(&card, "d/4").unwrap();
    let unknown = TaskId::from_random([9, 9, 9, 9]);
    assert!(matches!(
        s.lease_decomposition(&unknown, "a/1", 60, T0, None),
        Err(StoreError::Refused(Refusal::NoSuchTask(_)))
    ));

    // Eight holders on their own connections, one card: one lease.
    let card = NewTask {
        triage: true,
        ..NewTask::titled("wanted by all")
    };
    let card = s.create(&card, T0).unwrap().id;
    let start = Arc::new(Barrier::new(8));
    let winners: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (store, start, card) = (board.connect(), start.clone(), card.clone());
                scope.spawn(move || {
                    start.wait();
                    let leased = store.lease_decomposition(&card, &format!("g{i}/1"), 60, T0, None);
                    usize::from(leased.unwrap() == DecompositionLease::Leased)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(winners, 1, "exactly one holder leases the card");
}

/// `claim_ready` claims those of the named tasks still ready, skipping one claimed
/// meanwhile and an unknown id, each under a fresh run recorded on the claimer's host.
pub fn claim_ready_takes_what_is_still_ready(board: &dyn Backend) {
    let s = board.connect();
    let ids: Vec<TaskId> = (0..3)
        .map(|i| {
            s.create(&NewTask::titled(format!("ready {i}")), T0 + i)
                .unwrap()
                .id
        })
        .collect();
    let taken = s.claim(&ids[1], 60, T0 + 5).unwrap();
    let mut offered = ids.clone();
    offered.push(TaskId::from_random([9, 9, 9, 8]));
    let offered: Vec<Offer> = offered.into_iter().map(Offer::work).collect();
    let claims = s.claim_ready(&offered, 60, Some("host-a"), T0 + 6).unwrap();
    let claimed: Vec<&TaskId> = claims.iter().map(|c| &c.task.id).collect();
    assert_eq!(claimed, [&ids[0], &ids[2]]);
    for c in &claims {
        let task = s.get(&c.task.id).unwrap();
        assert_eq!(task.current_run_id(), Some(c.run_id));
        assert_ne!(c.run_id, taken.run_id);
        assert_eq!(
            task.worker_host(),
            Some("host-a"),
            "the claimer's host, from the claim on"
        );
        let run = s.runs(&c.task.id).unwrap().pop().unwrap();
        assert_eq!(
            (run.worker_host.as_deref(), run.worker_pid),
            (Some("host-a"), None)
        );
    }
    let other = s.get(&ids[1]).unwrap();
    assert_eq!(other.current_run_id(), Some(taken.run_id));
    assert_eq!(other.worker_host(), None, "a claim naming no host records none");
    assert!(
        s.claim_ready(
            &ids.into_iter().map(Offer::work).collect::<Vec<_>>(),
            60,
            None,
            T0 + 7
        )
        .unwrap()
        .is_empty(),
        "nothing is ready any more"
    );
}

/// An automatic commit made under a decomposition lease goes through only while that
/// lease holds: not once it lapsed, not once another holder took it, not with no lease;
/// a refused commit changes nothing.
pub fn a_plan_commits_only_under_its_live_lease(board: &dyn Backend) {
    let s = board.connect();
    let card = NewTask {
        triage: true,
        ..NewTask::titled("commit under a lease")
    };
    let card = s.create(&card, T0).unwrap().id;
    let plan = Plan::Single {
        title: "tightened".into(),
        body: String::new(),
        assignee: Some("default".into()),
    };
    let settings = PlanSettings::default();
    let basis = |holder: &str| PlanBasis::of(&s.facts(&card).unwrap()).under_lease(Some(holder.into()));
    let refused = |holder: &str, at: i64| {
        let err = s
            .commit_plan(&card, &basis(holder), Mode::Automatic, &plan, &settings, at)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Refused(Refusal::LeaseLapsed(ref id)) if id == &card),
            "{holder} at {at}: {err}"
        );
        assert_eq!(
            s.get(&card).unwrap().status,
            crate::Status::Triage,
            "nothing changed"
        );
    };
    refused("a/1", T0 + 1);
    s.lease_decomposition(&card, "a/1", 60, T0, None).unwrap();
    refused("b/2", T0 + 1);
    refused("a/1", T0 + 60);
    s.lease_decomposition(&card, "b/2", 60, T0 + 60, None).unwrap();
    refused("a/1", T0 + 61);
    let committed = s.commit_plan(&card, &basis("b/2"), Mode::Automatic, &plan, &settings, T0 + 61);
    assert!(committed.is_ok(), "{committed:?}");
    assert_eq!(s.get(&card).unwrap().status, crate::Status::Ready);
}
