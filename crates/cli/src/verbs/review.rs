//! The review lane's verbs (docs/board.md#checks): `request-review`, `request-changes`,
//! `approve`, `reopen-review`. Inside a worker or a reviewer's run they act on the run's
//! own task, guarded by the run; a person names the task.

use board_core::{Request, RunId, TaskId};
use gateway::channel::CheckReport;

use crate::args::{ApproveArgs, RequestChangesArgs, RequestReviewArgs};
use crate::failure::Failure;
use crate::output::{print_json_line, status_label};
use crate::verbs::work::Finished;
use crate::verbs::{id_and_words, identity, target, Ctx, Desk, Worker};

pub fn request_review(desk: &Desk, a: RequestReviewArgs) -> Result<(), Failure> {
    let check = CheckReport::RequestReview {
        reviewer: a.reviewer,
        summary: a.summary,
        result: a.result,
    };
    report(
        desk,
        ("request-review", "review requested for"),
        a.id,
        a.run,
        &check,
    )
}

pub fn request_changes(desk: &Desk, a: RequestChangesArgs) -> Result<(), Failure> {
    let in_worker = Worker::from_env()?.is_some();
    let (id, words) = id_and_words(&a.words, in_worker)?;
    if words.is_empty() {
        return Err(Failure::Usage(
            "request-changes needs a reason: kanban request-changes [ID] REASON...".to_owned(),
        ));
    }
    let check = CheckReport::RequestChanges {
        reason: words.join(" "),
        author: Some(identity::caller()),
    };
    report(
        desk,
        ("request-changes", "changes requested on"),
        id,
        a.run,
        &check,
    )
}

pub fn approve(desk: &Desk, a: ApproveArgs) -> Result<(), Failure> {
    let check = CheckReport::Approve { summary: a.summary };
    report(desk, ("approve", "approved"), a.id, a.run, &check)
}

/// Reports `check` on the task named, else (inside a run) the run's own, guarded by the
/// run; prints `{"task_id", "ok"}` (or `DONE ID` for people) and turns a lost guard into
/// exit 1.
fn report(
    desk: &Desk,
    (verb, done): (&str, &str),
    id: Option<TaskId>,
    run: Option<RunId>,
    check: &CheckReport,
) -> Result<(), Failure> {
    let f = checked(desk, verb, (id, run), check)?;
    if desk.json {
        print_json_line(&f.to_json());
    } else if f.ok {
        println!("{done} {}", f.id);
    }
    f.won(desk, verb)
}

/// Reports `check` on the task named, else (inside a run) the run's own, guarded by the
/// run: whether it won.
pub fn checked(
    desk: &Desk,
    verb: &str,
    (id, run): (Option<TaskId>, Option<RunId>),
    check: &CheckReport,
) -> Result<Finished, Failure> {
    let worker = Worker::from_env()?;
    let (id, guard) = target(id, run, worker.as_ref(), verb)?;
    let ok = desk.check(&id, guard, check)?;
    Ok(Finished { id, run: guard, ok })
}

pub fn reopen_review(ctx: &Ctx, id: &TaskId, reason: Option<String>) -> Result<(), Failure> {
    let task = ctx
        .store
        .transition(id, &Request::ReopenReview { reason }, ctx.now)?;
    if ctx.json {
        print_json_line(&crate::output::task_json(&task));
    } else {
        println!("reopened review of {}  {}", task.id, status_label(task.status));
    }
    Ok(())
}
