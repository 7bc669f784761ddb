//! What a person may do to a card from a page, by its status and claim, and why an
//! action is not offered (docs/web.md#pages): the web board shows only what applies. A
//! test holds each answer against the transitions themselves, so the page and the board
//! never disagree.

use crate::types::{Status, Task};

/// An action of a card's page, named as the web board's API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardAction {
    Comment,
    Assign,
    Edit,
    Decompose,
    Unblock,
    Reclaim,
    Archive,
    Approve,
    RequestChanges,
}

impl CardAction {
    /// Every action, in the order a page lists them.
    pub const ALL: [CardAction; 9] = [
        CardAction::Approve,
        CardAction::RequestChanges,
        CardAction::Comment,
        CardAction::Assign,
        CardAction::Edit,
        CardAction::Decompose,
        CardAction::Unblock,
        CardAction::Reclaim,
        CardAction::Archive,
    ];

    /// The action's name in the API (`POST /api/tasks/ID/NAME`).
    pub fn as_str(self) -> &'static str {
        match self {
            CardAction::Comment => "comment",
            CardAction::Assign => "assign",
            CardAction::Edit => "edit",
            CardAction::Decompose => "decompose",
            CardAction::Unblock => "unblock",
            CardAction::Reclaim => "reclaim",
            CardAction::Archive => "archive",
            CardAction::Approve => "approve",
            CardAction::RequestChanges => "request-changes",
        }
    }

    /// Why `task` cannot take this action now; `None` when it can.
    pub fn refused(self, task: &Task) -> Option<&'static str> {
        use Status::{Archived, Blocked, Done, Review, Running, Scheduled, Triage, Verifying};
        let status = task.status;
        match self {
            CardAction::Comment => None,
            CardAction::Assign => match status {
                Running => Some("a worker holds it: reclaim it first"),
                Verifying | Review => Some("its work is being checked"),
                Archived => Some("it is archived"),
                _ => None,
            },
            CardAction::Edit => match status {
                Done => Some("it is done: reopen it to change it"),
                Verifying | Review => Some("its work is being checked"),
                Archived => Some("it is archived"),
                _ => None,
            },
            CardAction::Decompose => (status != Triage).then_some("only a triage card is decomposed"),
            CardAction::Unblock => (!matches!(status, Blocked | Scheduled))
                .then_some("only a blocked or scheduled card waits for it"),
            CardAction::Reclaim => task.lease.is_none().then_some("no worker holds it"),
            CardAction::Archive => (status == Archived).then_some("it is archived"),
            CardAction::Approve | CardAction::RequestChanges => {
                (status != Review).then_some("only work in review is approved or sent back")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transition::{decide, facts_of, Fresh, Request};

    const T: i64 = 1_750_000_000;

    /// The actions whose rule is the task's status alone, as the board decides them.
    #[test]
    fn the_offered_actions_are_those_the_board_allows() {
        let fresh = Fresh {
            run_id: 1,
            claim_lock: "lock".into(),
        };
        let requests = [
            (
                CardAction::Assign,
                Request::Assign {
                    assignee: Some("p".into()),
                },
            ),
            (
                CardAction::Edit,
                Request::Edit {
                    title: Some("new".into()),
                    body: None,
                    priority: None,
                },
            ),
            (CardAction::Unblock, Request::Unblock { reason: None }),
            (CardAction::Archive, Request::Archive),
        ];
        for status in Status::ALL.iter().copied() {
            let facts = facts_of(status, T);
            for (action, request) in &requests {
                let decided = decide(&facts, request, &fresh, T);
                assert_eq!(
                    action.refused(&facts.task).is_none(),
                    decided.is_ok(),
                    "{action:?} on a {status} task: {decided:?}"
                );
            }
        }
    }

    #[test]
    fn review_decompose_and_reclaim_are_offered_only_where_they_apply() {
        for status in Status::ALL.iter().copied() {
            let task = facts_of(status, T).task;
            assert_eq!(
                CardAction::Approve.refused(&task).is_none(),
                status == Status::Review
            );
            assert_eq!(
                CardAction::Decompose.refused(&task).is_none(),
                status == Status::Triage
            );
            assert!(
                CardAction::Reclaim.refused(&task).is_some(),
                "no lease, nothing to reclaim"
            );
            assert_eq!(CardAction::Comment.refused(&task), None);
        }
    }
}
