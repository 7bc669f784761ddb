//! What a tick did, and what a plan would do, in one shape.

use board_core::{Outcome, TaskId};
use serde::Serialize;

use super::{Action, StopReason};

/// What one tick did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TickReport {
    pub reaped: Vec<TaskId>,
    pub reclaimed: Vec<TaskId>,
    pub extended: Vec<TaskId>,
    pub timed_out: Vec<TaskId>,
    /// Live workers stopped because their run ended without them.
    pub disowned: Vec<TaskId>,
    pub decompositions_started: Vec<TaskId>,
    /// Decompositions running in the background after this tick.
    pub decompositions_in_flight: usize,
    /// Scheduled tasks put back to work, their time come.
    pub resumed: Vec<TaskId>,
    /// Recurring tasks whose time came (a copy made, or skipped while the last is open).
    pub recurred: Vec<TaskId>,
    pub promoted: Vec<TaskId>,
    pub spawned: Vec<TaskId>,
    pub errors: Vec<String>,
    /// A dry run's view of the cost safety (`Dispatcher::cost_safety`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_safety: Option<serde_json::Value>,
}

impl TickReport {
    /// Adds what a later pass did to this report.
    pub fn absorb(&mut self, later: TickReport) {
        self.reaped.extend(later.reaped);
        self.reclaimed.extend(later.reclaimed);
        self.extended.extend(later.extended);
        self.timed_out.extend(later.timed_out);
        self.disowned.extend(later.disowned);
        self.decompositions_started.extend(later.decompositions_started);
        self.resumed.extend(later.resumed);
        self.recurred.extend(later.recurred);
        self.promoted.extend(later.promoted);
        self.spawned.extend(later.spawned);
        self.errors.extend(later.errors);
    }
}

/// What a plan would do, in the shape of a tick's report: a stop counts where the run
/// it begins to end would (timed out, or reclaimed as stale).
pub fn preview(actions: &[Action], in_flight: usize) -> TickReport {
    let mut report = TickReport {
        decompositions_in_flight: in_flight,
        ..TickReport::default()
    };
    for action in actions {
        let id = || action.tasks().into_iter().cloned();
        match action {
            Action::Reap { .. } | Action::AutoComplete { .. } => report.reaped.extend(id()),
            Action::ReleaseAdopted { .. } => {
                report.reaped.extend(id());
                report.reclaimed.extend(id());
            }
            Action::Stop {
                reason: StopReason::TimedOut { .. },
                ..
            } => report.timed_out.extend(id()),
            Action::EndRun { ending, .. } if ending.outcome == Outcome::TimedOut => {
                report.timed_out.extend(id())
            }
            Action::Stop { .. } | Action::EndRun { .. } => report.reclaimed.extend(id()),
            Action::ExtendLease { .. } => report.extended.extend(id()),
            Action::Disown { .. } => report.disowned.extend(id()),
            Action::StartDecomposition { .. } => {
                report.decompositions_in_flight += 1;
                report.decompositions_started.extend(id());
            }
            Action::Promote { .. } => report.promoted.extend(id()),
            Action::Resume { .. } | Action::EndRecurrence { .. } => report.resumed.extend(id()),
            Action::Recur { .. } => report.recurred.extend(id()),
            Action::Spawn { .. } => report.spawned.extend(id()),
            Action::Kill { .. }
            | Action::LetGo { .. }
            | Action::SkipNonspawnable { .. }
            | Action::NoteCeiling { .. }
            | Action::ReleaseDecomposition { .. }
            | Action::TakeOverLease { .. }
            | Action::RememberFailure { .. }
            | Action::Claim { .. } => {}
        }
    }
    report
}
