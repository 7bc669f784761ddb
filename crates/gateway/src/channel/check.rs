//! The checks a worker reports on its own run (docs/board.md#checks), and what a verify
//! run's worker is told to run.

use board_core::{Request, RunId, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A check a worker reports on its own run (docs/board.md#checks).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum CheckReport {
    /// The work is done and waits for a reviewer (`kanban request-review`).
    RequestReview {
        reviewer: Option<String>,
        summary: Option<String>,
        result: Option<String>,
    },
    /// The reviewer sends the work back (`kanban request-changes REASON`); `author` signs
    /// the comment (a person's name; a reviewer's run signs with its profile).
    RequestChanges {
        reason: String,
        #[serde(default)]
        author: Option<String>,
    },
    /// The reviewer passes the work (`kanban approve`).
    Approve { summary: Option<String> },
    /// The verifiers of a verify run finished (`kanban verify`).
    Verified {
        passed: bool,
        evidence: Value,
        failure: Option<String>,
    },
}

/// The limits a check is decided under, from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckLimits {
    /// `kanban.review_round_limit`.
    pub review_rounds: i64,
    /// `kanban.verify_failure_limit`.
    pub verify_failures: i64,
}

impl CheckReport {
    /// The board's request for this check, guarded by `run` (`None`: a person's, on a
    /// task nobody works on; a verdict without its run cannot land).
    pub fn request(self, run: Option<RunId>, limits: CheckLimits) -> Request {
        match self {
            CheckReport::RequestReview {
                reviewer,
                summary,
                result,
            } => Request::RequestReview {
                expected_run_id: run,
                reviewer,
                summary,
                result,
            },
            CheckReport::RequestChanges { reason, author } => Request::RequestChanges {
                expected_run_id: run,
                author,
                reason,
                round_limit: limits.review_rounds,
            },
            CheckReport::Approve { summary } => Request::Approve {
                expected_run_id: run,
                summary,
            },
            CheckReport::Verified {
                passed,
                evidence,
                failure,
            } => Request::Verified(Verdict {
                run_id: run.unwrap_or_default(),
                passed,
                evidence,
                failure,
                failure_limit: limits.verify_failures,
            }),
        }
    }

    /// The text fields a cap applies to, named as messages name them.
    pub fn texts(&self) -> Vec<(&'static str, Option<&str>)> {
        match self {
            CheckReport::RequestReview { summary, result, .. } => {
                vec![
                    ("the summary", summary.as_deref()),
                    ("the result", result.as_deref()),
                ]
            }
            CheckReport::RequestChanges { reason, .. } => vec![("the reason", Some(reason))],
            CheckReport::Approve { summary } => vec![("the summary", summary.as_deref())],
            CheckReport::Verified { failure, .. } => vec![("the verifier output", failure.as_deref())],
        }
    }
}

/// What a verify run's worker runs: each verifier (an argv list), and how long one may take.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verifiers {
    pub steps: Vec<Vec<String>>,
    pub timeout_seconds: i64,
}
