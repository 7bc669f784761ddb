//! What the decomposer hands the store: a validated plan, the snapshot it was based on,
//! and the guards re-checked at commit (docs/decomposer.md#the-commit).

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::graph::{blank_task, check_title, Created};
use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::store::{Committed, StoreResult};
use crate::transition::{Change, NewEvent, TaskFacts};
use crate::types::{Link, Status, Task, TaskId, Timestamp};

/// The default for `kanban.decompose_max_children`.
pub const DEFAULT_MAX_CHILDREN: usize = 16;
/// No configuration may raise the child cap above this.
pub const MAX_CHILDREN_CEILING: usize = 64;
/// Child titles are cut to this many characters.
pub const CHILD_TITLE_MAX_CHARS: usize = 200;

/// Who asked for a decomposition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A person's `kanban decompose`: may touch a card with history.
    Manual,
    /// The gateway's: never touches history, parked or cooling cards.
    Automatic,
}

/// One child of a fan-out, its assignee already resolved against the roster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTask {
    pub title: String,
    pub body: String,
    pub assignee: String,
    /// 0-based indices into the plan's tasks: the siblings this one waits for.
    pub parents: Vec<usize>,
}

/// A validated reply of the decomposer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Plan {
    /// One tightened task: the card itself is rewritten.
    Single {
        title: String,
        body: String,
        assignee: Option<String>,
    },
    /// A dependency graph of children under the card.
    Fanout {
        rationale: Option<String>,
        tasks: Vec<PlannedTask>,
    },
}

/// What the card looked like when the model was asked; the commit refuses if it moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanBasis {
    pub revision: i64,
    pub run_count: i64,
    /// The holder (`host/pid`) of the card's decomposition lease the call was made under
    /// (automatic calls): the commit refuses unless that lease still holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_holder: Option<String>,
}

impl PlanBasis {
    pub fn of(facts: &TaskFacts) -> PlanBasis {
        PlanBasis {
            revision: facts.task.revision,
            run_count: facts.run_count,
            lease_holder: None,
        }
    }

    /// The same basis, committed only while `holder`'s decomposition lease holds.
    pub fn under_lease(self, holder: Option<String>) -> PlanBasis {
        PlanBasis {
            lease_holder: holder,
            ..self
        }
    }
}

/// A commit under a decomposition lease ([`PlanBasis::lease_holder`]) needs that lease
/// as the store holds it now (`current`: holder and expiry): the same holder, not
/// lapsed. A lapsed lease may have been taken over, and the card's next request sent.
pub fn lease_holds(
    card: &TaskId,
    holder: &str,
    current: Option<(String, Timestamp)>,
    now: Timestamp,
) -> Result<(), Refusal> {
    match current {
        Some((h, expires)) if h == holder && expires > now => Ok(()),
        _ => Err(Refusal::LeaseLapsed(card.clone())),
    }
}

/// Settings from `kanban.*` that shape a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSettings {
    pub max_children: usize,
    pub orchestrator: String,
    pub auto_promote_children: bool,
}

impl Default for PlanSettings {
    fn default() -> Self {
        PlanSettings {
            max_children: DEFAULT_MAX_CHILDREN,
            orchestrator: "default".to_owned(),
            auto_promote_children: true,
        }
    }
}

/// The effects of a committed plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanCommit {
    pub root: Change,
    /// New children in reply order, each with its events.
    pub children: Vec<Created>,
    /// Sibling links and the root's links under every child.
    pub links: Vec<Link>,
}

/// The writes of a plan's commit, as a store makes them inside its one transaction.
pub trait PlanWrites {
    /// The card's facts, read (and locked, where the store locks) for the commit.
    fn facts(&mut self, id: &TaskId) -> StoreResult<TaskFacts>;
    /// A task id not on the board and not among `drawn`.
    fn unused_task_id(&mut self, drawn: &[TaskId]) -> StoreResult<TaskId>;
    fn insert_created(&mut self, child: Created, now: Timestamp) -> StoreResult<()>;
    fn insert_links(&mut self, links: Vec<Link>) -> StoreResult<()>;
    /// Writes the card's decided change over `old`.
    fn apply(&mut self, old: &Task, change: Change, now: Timestamp) -> StoreResult<()>;
    /// The card's decomposition lease (holder, expiry), locked where the store locks.
    fn decomposition_lease(&mut self, id: &TaskId) -> StoreResult<Option<(String, Timestamp)>>;
}

/// Commits a plan through a store's writes, in the one order every store uses: the
/// card's facts, fresh child ids, the core's decision, the children, their links, and
/// last the card itself.
pub fn write_plan(
    w: &mut impl PlanWrites,
    id: &TaskId,
    basis: &PlanBasis,
    mode: Mode,
    plan: &Plan,
    settings: &PlanSettings,
    now: Timestamp,
) -> StoreResult<Committed> {
    let facts = w.facts(id)?;
    let child_ids = draw_child_ids(plan, settings, |drawn| w.unused_task_id(drawn))?;
    let commit = commit_plan(&facts, basis, mode, plan, settings, &child_ids, now)?;
    if let Some(holder) = &basis.lease_holder {
        let current = w.decomposition_lease(id)?;
        lease_holds(id, holder, current, now)?;
    }
    for child in commit.children {
        w.insert_created(child, now)?;
    }
    w.insert_links(commit.links)?;
    let root = commit.root.task.clone();
    w.apply(&facts.task, commit.root, now)?;
    Ok(Committed { root, child_ids })
}

/// The most children a fan-out may have under `kanban.decompose_max_children`: at least
/// one (a fan-out of one is a valid plan), never above the ceiling.
pub fn child_limit(max_children: usize) -> usize {
    max_children.clamp(1, MAX_CHILDREN_CEILING)
}

/// How many fresh task ids a store draws before committing `plan`: one per child of a
/// fan-out within [`child_limit`], none for a single task. A fan-out over the limit gets
/// none either: [`commit_plan`] refuses it, so ids drawn for it would be wasted.
pub fn child_ids_needed(plan: &Plan, settings: &PlanSettings) -> usize {
    match plan {
        Plan::Fanout { tasks, .. } if tasks.len() <= child_limit(settings.max_children) => tasks.len(),
        Plan::Fanout { .. } | Plan::Single { .. } => 0,
    }
}

/// Draws the fresh child ids `plan` needs ([`child_ids_needed`]), each from `draw`, which
/// is shown the ids drawn so far so it never repeats one.
pub fn draw_child_ids<E>(
    plan: &Plan,
    settings: &PlanSettings,
    mut draw: impl FnMut(&[TaskId]) -> Result<TaskId, E>,
) -> Result<Vec<TaskId>, E> {
    let count = child_ids_needed(plan, settings);
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let fresh = draw(&ids)?;
        ids.push(fresh);
    }
    Ok(ids)
}

/// The first violation of a fan-out's shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadFanout {
    #[error("tasks is empty")]
    Empty,
    #[error("reply has {count} tasks, limit is {limit}")]
    TooMany { count: usize, limit: usize },
    #[error("tasks[{0}].title is blank")]
    BlankTitle(usize),
    #[error("tasks[{task}].parents: index {parent} out of range")]
    ParentOutOfRange { task: usize, parent: usize },
    #[error("tasks[{0}].parents: a task cannot wait for itself")]
    WaitsForItself(usize),
    #[error("tasks[{task}].parents: index {parent} repeated")]
    RepeatedParent { task: usize, parent: usize },
    #[error("tasks[{0}] is part of a dependency cycle")]
    Cycle(usize),
}

/// Validates a fan-out's shape: size within the cap, titles present, parent indices in
/// range, not self, not repeated, and no cycle. The error names the first violation.
pub fn validate_fanout(tasks: &[PlannedTask], max_children: usize) -> Result<(), BadFanout> {
    let limit = child_limit(max_children);
    if tasks.is_empty() {
        return Err(BadFanout::Empty);
    }
    if tasks.len() > limit {
        let count = tasks.len();
        return Err(BadFanout::TooMany { count, limit });
    }
    for (task, t) in tasks.iter().enumerate() {
        if t.title.trim().is_empty() {
            return Err(BadFanout::BlankTitle(task));
        }
        for (k, &parent) in t.parents.iter().enumerate() {
            if parent >= tasks.len() {
                return Err(BadFanout::ParentOutOfRange { task, parent });
            }
            if parent == task {
                return Err(BadFanout::WaitsForItself(task));
            }
            if t.parents[..k].contains(&parent) {
                return Err(BadFanout::RepeatedParent { task, parent });
            }
        }
    }
    match first_in_cycle(tasks) {
        Some(task) => Err(BadFanout::Cycle(task)),
        None => Ok(()),
    }
}

/// Kahn's algorithm: the smallest index left over once every acyclic node is removed.
fn first_in_cycle(tasks: &[PlannedTask]) -> Option<usize> {
    let mut waiting: Vec<usize> = tasks.iter().map(|t| t.parents.len()).collect();
    let mut ready: Vec<usize> = (0..tasks.len()).filter(|&i| waiting[i] == 0).collect();
    let mut done = vec![false; tasks.len()];
    while let Some(p) = ready.pop() {
        done[p] = true;
        for (i, t) in tasks.iter().enumerate() {
            if t.parents.contains(&p) {
                waiting[i] -= 1;
                if waiting[i] == 0 {
                    ready.push(i);
                }
            }
        }
    }
    done.iter().position(|d| !d)
}

/// The guards an automatic call checks before spending anything.
pub fn automatic_guard(facts: &TaskFacts, now: Timestamp) -> Result<(), Refusal> {
    let task = &facts.task;
    if task.status != Status::Triage {
        return Err(not_triage(facts));
    }
    if facts.run_count > 0 {
        return Err(Refusal::ExecutionHistory(task.id.clone()));
    }
    if facts.decomposed {
        return Err(Refusal::AlreadyDecomposed(task.id.clone()));
    }
    if task.decompose_parked {
        return Err(Refusal::Parked(task.id.clone()));
    }
    if let Some(at) = task.decompose_next_attempt_at {
        if at > now {
            return Err(Refusal::NotDue {
                id: task.id.clone(),
                at,
            });
        }
    }
    Ok(())
}

fn not_triage(facts: &TaskFacts) -> Refusal {
    Refusal::WrongStatus {
        id: facts.task.id.clone(),
        status: facts.task.status,
        op: "decomposition",
        allowed: "triage",
    }
}

/// Commits a plan against the card as it is now. `child_ids` holds the
/// [`child_ids_needed`] fresh ids: one per child of a fan-out within the cap.
pub fn commit_plan(
    facts: &TaskFacts,
    basis: &PlanBasis,
    mode: Mode,
    plan: &Plan,
    settings: &PlanSettings,
    child_ids: &[TaskId],
    now: Timestamp,
) -> Result<PlanCommit, Refusal> {
    let root = &facts.task;
    if root.status != Status::Triage {
        return Err(not_triage(facts));
    }
    if facts.decomposed {
        return Err(Refusal::AlreadyDecomposed(root.id.clone()));
    }
    if mode == Mode::Automatic {
        if facts.run_count > basis.run_count || facts.run_count > 0 {
            return Err(Refusal::GainedHistory(root.id.clone()));
        }
        if root.decompose_parked {
            return Err(Refusal::Parked(root.id.clone()));
        }
    }
    if root.revision != basis.revision {
        return Err(Refusal::InputChanged(root.id.clone()));
    }
    match plan {
        Plan::Single {
            title,
            body,
            assignee,
        } => commit_single(facts, mode, title, body, assignee, now),
        Plan::Fanout { rationale, tasks } => {
            commit_fanout(root, mode, rationale, tasks, settings, child_ids, now)
        }
    }
}

/// The root as a plan leaves it: its automatic-decomposition failures forgotten.
fn committed_root(root: &Task, now: Timestamp) -> Task {
    let mut next = root.clone();
    next.updated_at = now;
    next.decompose_failures = 0;
    next.decompose_parked = false;
    next.decompose_next_attempt_at = None;
    next.decompose_last_error = None;
    next
}

/// One child of a fan-out, with its events; its links to its siblings go to `links`.
fn planned_child(
    root: &Task,
    planned: &PlannedTask,
    id: &TaskId,
    child_ids: &[TaskId],
    settings: &PlanSettings,
    now: Timestamp,
    links: &mut Vec<Link>,
) -> Created {
    let promote = settings.auto_promote_children && planned.parents.is_empty();
    let status = if promote { Status::Ready } else { Status::Todo };
    let title: String = planned.title.chars().take(CHILD_TITLE_MAX_CHARS).collect();
    let mut task = blank_task(id.clone(), title, status, now);
    task.body = planned.body.clone();
    task.assignee = Some(planned.assignee.clone());
    task.priority = root.priority;
    task.created_by = Some("decomposer".to_owned());
    task.tenant = root.tenant.clone();
    let parents: Vec<&TaskId> = planned.parents.iter().map(|&p| &child_ids[p]).collect();
    let mut events = vec![NewEvent::new(
        EventKind::Created,
        None,
        json!({ "status": Status::Todo, "parents": parents, "decomposed_from": root.id, "assignee": planned.assignee }),
    )];
    for parent in parents {
        events.push(NewEvent::new(
            EventKind::Linked,
            None,
            json!({ "parent": parent }),
        ));
        links.push(Link {
            parent_id: parent.clone(),
            child_id: task.id.clone(),
        });
    }
    if promote {
        events.push(NewEvent::new(EventKind::Promoted, None, json!({})));
    }
    Created {
        task,
        links: Vec::new(),
        events,
    }
}

/// The root of a single-task plan: specified in place, promoted when nothing holds it.
fn commit_single(
    facts: &TaskFacts,
    mode: Mode,
    title: &str,
    body: &str,
    assignee: &Option<String>,
    now: Timestamp,
) -> Result<PlanCommit, Refusal> {
    let mut next = committed_root(&facts.task, now);
    if title.trim().is_empty() && body.trim().is_empty() {
        return Err(Refusal::InvalidPlan(
            "a single task needs a title or a body".to_owned(),
        ));
    }
    if !title.trim().is_empty() {
        check_title(title)?;
        next.title = title.to_owned();
    }
    if !body.trim().is_empty() {
        next.body = body.to_owned();
    }
    if next.assignee.is_none() {
        next.assignee = assignee.clone();
    }
    next.revision += 1;
    let mut events = vec![NewEvent::new(
        EventKind::Specified,
        None,
        json!({ "mode": mode, "title": next.title, "assignee": next.assignee }),
    )];
    next.status = Status::Todo;
    if facts.open_parents == 0 {
        next.status = Status::Ready;
        events.push(NewEvent::new(EventKind::Promoted, None, json!({})));
    }
    Ok(PlanCommit {
        root: Change {
            task: next,
            runs: Vec::new(),
            events,
            wake_children: false,
            hold_children: false,
            comment: None,
        },
        children: Vec::new(),
        links: Vec::new(),
    })
}

/// A fan-out: the children with their links and events, and the root waiting on them.
fn commit_fanout(
    root: &Task,
    mode: Mode,
    rationale: &Option<String>,
    tasks: &[PlannedTask],
    settings: &PlanSettings,
    child_ids: &[TaskId],
    now: Timestamp,
) -> Result<PlanCommit, Refusal> {
    let mut next = committed_root(root, now);
    validate_fanout(tasks, settings.max_children).map_err(|e| Refusal::InvalidPlan(e.to_string()))?;
    if child_ids.len() != tasks.len() {
        return Err(Refusal::Invalid(format!(
            "{} ids for {} children",
            child_ids.len(),
            tasks.len()
        )));
    }
    let mut links = Vec::new();
    let mut children = Vec::with_capacity(tasks.len());
    for (planned, id) in tasks.iter().zip(child_ids) {
        children.push(planned_child(
            root, planned, id, child_ids, settings, now, &mut links,
        ));
    }
    let mut root_events = Vec::new();
    for id in child_ids {
        links.push(Link {
            parent_id: id.clone(),
            child_id: root.id.clone(),
        });
        root_events.push(NewEvent::new(EventKind::Linked, None, json!({ "parent": id })));
    }
    next.status = Status::Todo;
    next.assignee = Some(settings.orchestrator.clone());
    root_events.push(NewEvent::new(
        EventKind::Decomposed,
        None,
        json!({
            "child_ids": child_ids,
            "root_assignee": settings.orchestrator,
            "mode": mode,
            "rationale": rationale,
        }),
    ));
    Ok(PlanCommit {
        root: Change {
            task: next,
            runs: Vec::new(),
            events: root_events,
            wake_children: false,
            hold_children: false,
            comment: None,
        },
        children,
        links,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(parents: &[usize]) -> PlannedTask {
        PlannedTask {
            title: "x".into(),
            body: String::new(),
            assignee: "default".into(),
            parents: parents.to_vec(),
        }
    }

    #[test]
    fn fanout_shapes_are_checked_with_named_reasons() {
        assert_eq!(validate_fanout(&[planned(&[]), planned(&[0])], 16), Ok(()));
        let many: Vec<_> = (0..500).map(|_| planned(&[])).collect();
        assert_eq!(
            validate_fanout(&many, 16).unwrap_err().to_string(),
            "reply has 500 tasks, limit is 16"
        );
        assert_eq!(
            validate_fanout(&[planned(&[]), planned(&[9])], 16)
                .unwrap_err()
                .to_string(),
            "tasks[1].parents: index 9 out of range"
        );
        assert_eq!(
            validate_fanout(&[planned(&[1]), planned(&[0])], 16)
                .unwrap_err()
                .to_string(),
            "tasks[0] is part of a dependency cycle"
        );
        assert!(validate_fanout(&[planned(&[0])], 16)
            .unwrap_err()
            .to_string()
            .contains("itself"));
        assert!(validate_fanout(&[planned(&[]), planned(&[0, 0])], 16)
            .unwrap_err()
            .to_string()
            .contains("repeated"));
        let cap: Vec<_> = (0..100).map(|_| planned(&[])).collect();
        assert!(validate_fanout(&cap, 1000)
            .unwrap_err()
            .to_string()
            .contains("limit is 64"));
    }
}
