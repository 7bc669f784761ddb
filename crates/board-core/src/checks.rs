//! What a run does and what a work run's completion must pass before it counts
//! (docs/board.md#checks).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::types::{word_enum, Status, UnknownWord};

word_enum!(
    /// What a run does: `task_runs.kind`. Each kind is claimed from its own status and
    /// returns the task there when it ends without a verdict.
    #[derive(Default)]
    RunKind, "run kind" {
        /// A worker of the task's profile does the work (claimed from `ready`).
        #[default]
        Work = "work",
        /// The gateway runs the verifiers on reported work (claimed from `verifying`).
        Verify = "verify",
        /// A reviewer profile reviews verified work (claimed from `review`).
        Review = "review",
    }
);

impl RunKind {
    /// The status a run of this kind is claimed from, and where its task goes back to
    /// when the run ends without a verdict (a crash, a timeout, a reclaim).
    pub fn waiting_status(self) -> Status {
        match self {
            RunKind::Work => Status::Ready,
            RunKind::Verify => Status::Verifying,
            RunKind::Review => Status::Review,
        }
    }
}

/// What a work run's completion must pass before its task is done, fixed by the claim
/// from the profile (and the task) it runs under: stored with the run, so a worker's
/// report cannot skip a check however it reaches the board.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Checks {
    /// The verifiers run on the reported work before it counts (`verify:`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
    /// The verified work waits for a reviewer's approval (`review: required`, or the
    /// worker asked for review).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
    /// The profile that reviews the work when it is reviewed (`reviewer:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// A completion without evidence is refused (the `evidence` contract).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub evidence: bool,
}

impl Checks {
    /// Whether no check applies: the completion is final, as before there were checks.
    pub fn is_none(&self) -> bool {
        *self == Checks::default()
    }
}
