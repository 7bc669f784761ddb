//! A comment's rules, decided inside the transaction that writes it: its text is not
//! blank, and a comment that speaks for a run (a worker's, guarded by its run id) lands
//! only while that run holds the task, so a worker whose run was reclaimed or ended adds
//! nothing to the card, however its call and the run's end interleave.

use serde_json::json;

use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::transition::NewEvent;
use crate::types::{RunId, Task};

/// Whether a comment's body says nothing: the board takes no such comment, and an import
/// skips one.
pub fn blank(body: &str) -> bool {
    body.trim().is_empty()
}

/// Refuses a blank comment, one over the board's limits, and one guarded by a run that is
/// not `task`'s current run.
pub fn admit(task: &Task, author: Option<&str>, body: &str, guard: Option<RunId>) -> Result<(), Refusal> {
    if blank(body) {
        return Err(Refusal::Invalid("a comment cannot be blank".into()));
    }
    crate::limits::text("the comment", body)?;
    author.map_or(Ok(()), |a| crate::limits::short("the author", a))?;
    match guard {
        Some(run) if task.current_run_id() != Some(run) => Err(Refusal::StaleRun {
            id: task.id.clone(),
            expected: run,
            current: task.current_run_id(),
        }),
        _ => Ok(()),
    }
}

/// The `commented` event of comment `comment_id`, naming the run it spoke for.
pub fn event(comment_id: i64, author: Option<&str>, guard: Option<RunId>) -> NewEvent {
    NewEvent::new(
        EventKind::Commented,
        guard,
        json!({ "comment_id": comment_id, "author": author }),
    )
}
