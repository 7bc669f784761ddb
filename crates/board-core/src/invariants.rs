//! The invariants of docs/board.md#invariants as checkable functions, shared by every property test.
//!
//! [`check_invariants`] checks one snapshot; [`check_step`] checks what may change
//! between two consecutive snapshots (terminal statuses, events with every change).

use std::collections::{BTreeMap, BTreeSet};

use crate::kinds::EventKind;
use crate::types::{BoardSnapshot, Status, Task, TaskId};

/// A broken invariant, naming the task and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant {number} violated: {detail}")]
pub struct Violation {
    pub number: u8,
    pub detail: String,
}

fn violation(number: u8, detail: String) -> Result<(), Violation> {
    Err(Violation { number, detail })
}

/// Checks invariants 1, 2, 6, 7 and 9 (and the shape of events) on one snapshot.
pub fn check_invariants(board: &BoardSnapshot) -> Result<(), Violation> {
    let status: BTreeMap<&TaskId, Status> = board.tasks.iter().map(|t| (&t.id, t.status)).collect();
    let mut open_runs: BTreeMap<&TaskId, Vec<i64>> = BTreeMap::new();
    for run in &board.runs {
        if !status.contains_key(&run.task_id) {
            return violation(2, format!("run {} belongs to no task ({})", run.id, run.task_id));
        }
        if run.is_open() {
            open_runs.entry(&run.task_id).or_default().push(run.id);
            if run.outcome.is_some() {
                return violation(2, format!("open run {} has an outcome", run.id));
            }
        } else if run.outcome.is_none() {
            return violation(2, format!("closed run {} has no outcome", run.id));
        }
    }
    for task in &board.tasks {
        let open = open_runs.get(&task.id).map(Vec::as_slice).unwrap_or(&[]);
        if open.len() > 1 {
            return violation(2, format!("{} has {} open runs", task.id, open.len()));
        }
        let running = task.status == Status::Running;
        // A lease names its run and claim lock together; what is left to check is that
        // only a running task holds one, and that its run is the task's one open run.
        let current = task.current_run_id();
        let consistent = match current {
            Some(current) => open == [current],
            None => open.is_empty(),
        };
        waits_in_time(task)?;
        if running != current.is_some() || !consistent {
            return violation(
                1,
                format!(
                    "{} is {} with current_run_id {:?}, open runs {:?}",
                    task.id, task.status, current, open
                ),
            );
        }
    }
    let mut parents_of: BTreeMap<&TaskId, Vec<&TaskId>> = BTreeMap::new();
    for link in &board.links {
        if link.parent_id == link.child_id {
            return violation(7, format!("{} is linked to itself", link.parent_id));
        }
        parents_of
            .entry(&link.child_id)
            .or_default()
            .push(&link.parent_id);
    }
    for task in &board.tasks {
        if matches!(task.status, Status::Ready | Status::Running) {
            for parent in parents_of.get(&task.id).into_iter().flatten() {
                let ps = status.get(parent).copied();
                if !ps.is_some_and(Status::releases_children) {
                    return violation(
                        6,
                        format!(
                            "{} is {} while parent {} is {:?}",
                            task.id, task.status, parent, ps
                        ),
                    );
                }
            }
        }
    }
    if let Some(id) = find_cycle(&parents_of) {
        return violation(7, format!("a link cycle passes through {id}"));
    }
    let mut last_event = 0;
    for event in &board.events {
        if event.id <= last_event {
            return violation(8, format!("event ids out of order at {}", event.id));
        }
        last_event = event.id;
    }
    Ok(())
}

/// Invariant 9: a time to wait for, and a recurring task's rule, belong to `scheduled`;
/// a recurring task always has its next time.
fn waits_in_time(task: &Task) -> Result<(), Violation> {
    if task.scheduled_until.is_some() && task.status != Status::Scheduled {
        return violation(9, format!("{} is {} with a scheduled time", task.id, task.status));
    }
    if task.recurrence.is_some() && task.scheduled_until.is_none() {
        return violation(9, format!("{} recurs with no time to wait for", task.id));
    }
    Ok(())
}

/// Depth-first search for a cycle in the parent graph; returns a task on it.
fn find_cycle<'a>(parents_of: &BTreeMap<&'a TaskId, Vec<&'a TaskId>>) -> Option<&'a TaskId> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Visiting,
        Done,
    }
    let mut marks: BTreeMap<&TaskId, Mark> = BTreeMap::new();
    for &start in parents_of.keys() {
        if marks.contains_key(start) {
            continue;
        }
        let mut stack: Vec<(&TaskId, usize)> = vec![(start, 0)];
        marks.insert(start, Mark::Visiting);
        while let Some((node, next)) = stack.pop() {
            let parents = parents_of.get(node).map(Vec::as_slice).unwrap_or(&[]);
            if let Some(&parent) = parents.get(next) {
                stack.push((node, next + 1));
                match marks.get(parent) {
                    Some(Mark::Visiting) => return Some(parent),
                    Some(Mark::Done) => {}
                    None => {
                        marks.insert(parent, Mark::Visiting);
                        stack.push((parent, 0));
                    }
                }
            } else {
                marks.insert(node, Mark::Done);
            }
        }
    }
    None
}

/// Checks invariants 5 and 8 across one step: no task leaves `done` except into
/// `archived`, none leaves `archived`, unless a person reopened it (a `reopened` event
/// in the step), and every task whose row changed has a new event.
pub fn check_step(before: &BoardSnapshot, after: &BoardSnapshot) -> Result<(), Violation> {
    let last_event = before.events.last().map_or(0, |e| e.id);
    let touched: BTreeSet<&TaskId> = after
        .events
        .iter()
        .filter(|e| e.id > last_event)
        .map(|e| &e.task_id)
        .collect();
    let reopened: BTreeSet<&TaskId> = after
        .events
        .iter()
        .filter(|e| e.id > last_event && e.kind == EventKind::Reopened)
        .map(|e| &e.task_id)
        .collect();
    let old: BTreeMap<&TaskId, _> = before.tasks.iter().map(|t| (&t.id, t)).collect();
    for task in &after.tasks {
        match old.get(&task.id) {
            Some(prev) => {
                let left_terminal = match prev.status {
                    Status::Done => !matches!(task.status, Status::Done | Status::Archived),
                    Status::Archived => task.status != Status::Archived,
                    _ => false,
                };
                if left_terminal && !reopened.contains(&task.id) {
                    return violation(5, format!("{} left {} for {}", task.id, prev.status, task.status));
                }
                let mut same = (*prev).clone();
                same.updated_at = task.updated_at;
                if same != *task && !touched.contains(&task.id) {
                    return violation(8, format!("{} changed without an event", task.id));
                }
            }
            None if !touched.contains(&task.id) => {
                return violation(8, format!("{} was created without an event", task.id));
            }
            None => {}
        }
    }
    if after.tasks.len() < before.tasks.len() || after.runs.len() < before.runs.len() {
        return violation(8, "rows disappeared".to_owned());
    }
    Ok(())
}
