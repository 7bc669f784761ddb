//! The board counted: what the stores answer with aggregates, never with rows loaded.

use serde::Serialize;

use crate::types::{Status, Task};

/// The board counted, each count one aggregate in the store (never rows loaded): what a
/// metrics scrape reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Tasks per status (`Status::as_str`); a status without tasks is absent.
    pub tasks: std::collections::BTreeMap<String, u64>,
    /// Ended runs per outcome (`Outcome::as_str`).
    pub runs: std::collections::BTreeMap<String, u64>,
    /// Billed model requests per outcome (`LlmCall::outcome`).
    pub llm_calls: std::collections::BTreeMap<String, u64>,
    /// Tokens the billed requests reported.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Decomposition events per kind, of [`DECOMPOSITION_EVENTS`] only.
    pub decompositions: std::collections::BTreeMap<String, u64>,
}

/// Tasks of one assignee (`None`: unassigned) in one status, counted by the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusCount {
    pub assignee: Option<String>,
    pub status: Status,
    pub tasks: u64,
}

impl StatusCount {
    /// Counts `tasks` as `Store::status_counts` answers: one entry per assignee and
    /// status with at least one task, unassigned first, then by assignee and status name.
    pub fn of_tasks<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Vec<StatusCount> {
        let mut counts: std::collections::BTreeMap<(Option<&str>, &str), (Status, u64)> =
            std::collections::BTreeMap::new();
        for t in tasks {
            counts
                .entry((t.assignee.as_deref(), t.status.as_str()))
                .or_insert((t.status, 0))
                .1 += 1;
        }
        counts
            .into_iter()
            .map(|((assignee, _), (status, tasks))| StatusCount {
                assignee: assignee.map(str::to_owned),
                status,
                tasks,
            })
            .collect()
    }
}

/// Finished tasks counted by the slot of their completion and the bucket of their
/// ready-to-done time (see `Store::finished`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Finished {
    pub slot: i64,
    pub bucket: usize,
    pub tasks: u64,
}

/// One UTC day of the ledger: requests, tokens, and requests that did not end `ok`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DaySpend {
    /// Days since the epoch (`started_at / 86400`).
    pub day: i64,
    pub requests: u64,
    pub tokens: u64,
    pub failures: u64,
}
