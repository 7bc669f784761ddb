//! The child cap of a decomposition, as every store applies it: the same plan commits, or
//! is refused with the same words, whichever backend holds the board.

use super::{assert_board_ok, Backend, T0};
use crate::plan::{Mode, Plan, PlanBasis, PlanSettings, PlannedTask, MAX_CHILDREN_CEILING};
use crate::store::Store;
use crate::NewTask;

fn fanout(children: usize) -> Plan {
    Plan::Fanout {
        rationale: None,
        tasks: (0..children)
            .map(|i| PlannedTask {
                title: format!("part {i}"),
                body: String::new(),
                assignee: "default".into(),
                parents: Vec::new(),
            })
            .collect(),
    }
}

/// Commits a fan-out of `children` under `max_children` on a fresh triage card.
fn commit(s: &dyn Store, children: usize, max_children: usize) -> Result<usize, String> {
    let card = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("split me")
            },
            T0,
        )
        .expect("create");
    let basis = PlanBasis::of(&s.facts(&card.id).expect("facts"));
    let settings = PlanSettings {
        max_children,
        ..PlanSettings::default()
    };
    let before = s.snapshot().expect("snapshot");
    match s.commit_plan(
        &card.id,
        &basis,
        Mode::Manual,
        &fanout(children),
        &settings,
        T0 + 1,
    ) {
        Ok(committed) => Ok(committed.child_ids.len()),
        Err(e) => {
            assert_eq!(
                s.snapshot().expect("snapshot"),
                before,
                "a refused plan changes nothing"
            );
            Err(e.to_string())
        }
    }
}

/// A cap of zero still allows one child (the parser accepts such a plan, so the commit
/// must too); a plan over the cap is refused with the parser's words; the ceiling holds
/// whatever the configuration says.
pub fn fanout_cap_is_one_rule(board: &dyn Backend) {
    let s = board.connect();
    assert_eq!(commit(&*s, 1, 0), Ok(1));
    let over = commit(&*s, 3, 2).unwrap_err();
    assert!(over.contains("reply has 3 tasks, limit is 2"), "{over}");
    assert_eq!(commit(&*s, 2, 2), Ok(2));
    let ceiling = MAX_CHILDREN_CEILING;
    let above = commit(&*s, ceiling + 1, 1000).unwrap_err();
    assert!(above.contains(&format!("limit is {ceiling}")), "{above}");
    assert_eq!(commit(&*s, ceiling, 1000), Ok(ceiling));
    assert_board_ok(&*s);
}
