//! A worker's reports, answered: each through the same `Store` call the CLI makes,
//! guarded by the worker's own run.

use board_core::{BoardWrites, Completion, RunId, StoreError, TaskId};
use board_home::config::text_within_cap;

use super::{Answer, Bound, CheckReport, Report, Terms};

/// Applies one report of the worker bound to `bound`: the same store calls as the CLI's,
/// with the bound run as the guard; a report naming another task or run, or a replay, is
/// refused without touching the board.
pub fn apply(store: &dyn BoardWrites, bound: &Bound, terms: &Terms, report: Report, now: i64) -> Answer {
    match answer(store, bound, terms, report, now) {
        Ok(answer) => answer,
        Err(Declined::Refused(message)) => Answer::Refused { message },
        Err(Declined::Usage(message)) => Answer::Usage { message },
    }
}

/// A report refused before or by the store.
enum Declined {
    Refused(String),
    Usage(String),
}

fn refused(message: String) -> Declined {
    Declined::Refused(message)
}

fn store_error(e: StoreError) -> Declined {
    refused(e.to_string())
}

fn answer(
    store: &dyn BoardWrites,
    bound: &Bound,
    terms: &Terms,
    report: Report,
    now: i64,
) -> Result<Answer, Declined> {
    let guard = Some(bound.run);
    let won = |ok| Ok(Answer::Won { ok });
    match report {
        Report::Heartbeat { task, run, note } => {
            own(bound, &task, run)?;
            capped("the heartbeat note", note.as_deref(), terms)?;
            won(store
                .heartbeat(&task, bound.run, terms.claim_ttl_seconds, note, now)
                .map_err(store_error)?)
        }
        Report::Complete {
            task,
            run,
            replay_run,
            result,
            summary,
            metadata,
            evidence,
        } => {
            own(bound, &task, run)?;
            if replay_run.is_some() {
                return Err(refused(
                    "--replay-run is for people; a worker's report channel completes its own run only"
                        .to_owned(),
                ));
            }
            capped("the result", result.as_deref(), terms)?;
            capped("the summary", summary.as_deref(), terms)?;
            for (what, json) in [("the metadata", &metadata), ("the evidence", &evidence)] {
                let bytes = json.as_ref().map_or(0, |m| m.to_string().len());
                text_within_cap(what, bytes, terms.max_text_bytes)
                    .map_err(|e| Declined::Usage(e.to_string()))?;
            }
            let completion = Completion {
                expected_run_id: guard,
                // The guard is always the worker's own run here.
                refuse_running: false,
                replay_ended_run_id: None,
                result,
                summary,
                metadata,
                evidence,
            };
            won(store.complete(&task, &completion, now).map_err(store_error)?)
        }
        Report::Block {
            task,
            run,
            kind,
            reason,
        } => {
            own(bound, &task, run)?;
            capped("the reason", reason.as_deref(), terms)?;
            won(store
                .block(&task, kind, reason, guard, now)
                .map_err(store_error)?)
        }
        Report::Comment { task, author, text } => comment(store, bound, terms, &task, author, &text, now),
        Report::Check { task, run, check } => checked(store, bound, terms, &task, run, check, now),
        read => look_up(store, bound, terms, read),
    }
}

/// The reports that read the board.
fn look_up(
    store: &dyn BoardWrites,
    bound: &Bound,
    terms: &Terms,
    report: Report,
) -> Result<Answer, Declined> {
    Ok(match report {
        Report::Task { task } => {
            readable(store, bound, &task)?;
            Answer::Task {
                task: Box::new(store.get(&task).map_err(store_error)?),
            }
        }
        Report::Parents { task } => {
            own(bound, &task, None)?;
            Answer::Tasks {
                tasks: store.parents(&task).map_err(store_error)?,
            }
        }
        Report::Runs { task } => {
            readable(store, bound, &task)?;
            Answer::Runs {
                runs: store.runs(&task).map_err(store_error)?,
            }
        }
        Report::Verifiers { task } => {
            own(bound, &task, None)?;
            let verifiers = terms
                .verify
                .clone()
                .ok_or_else(|| refused("only a verify run's worker runs verifiers".to_owned()))?;
            Answer::Verifiers { verifiers }
        }
        Report::Comments { task } => {
            own(bound, &task, None)?;
            Answer::Comments {
                comments: store.comments(&task).map_err(store_error)?,
            }
        }
        Report::Files { task } => {
            own(bound, &task, None)?;
            Answer::Files {
                files: terms.files.clone(),
            }
        }
        write => return Err(refused(format!("not a read: {write:?}"))),
    })
}

/// A comment guarded by the channel's run: the store refuses it, in the transaction
/// that would write it, once the run is over.
fn comment(
    store: &dyn BoardWrites,
    bound: &Bound,
    terms: &Terms,
    task: &TaskId,
    author: Option<String>,
    text: &str,
    now: i64,
) -> Result<Answer, Declined> {
    own(bound, task, None)?;
    capped("the comment", Some(text), terms)?;
    let comment = store
        .comment(task, author.as_deref(), text, Some(bound.run), now)
        .map_err(store_error)?;
    Ok(Answer::Comment { comment })
}

/// A report about the worker's own task (and, when given, its own run) only.
fn own(bound: &Bound, task: &TaskId, run: Option<RunId>) -> Result<(), Declined> {
    if *task != bound.task {
        return Err(refused(format!(
            "this worker's report channel speaks for task {} only; {task} was refused",
            bound.task
        )));
    }
    match run {
        Some(run) if run != bound.run => Err(refused(format!(
            "this worker's report channel speaks for run {} of {task} only; run {run} was refused",
            bound.run
        ))),
        _ => Ok(()),
    }
}

fn capped(what: &str, text: Option<&str>, terms: &Terms) -> Result<(), Declined> {
    match text {
        Some(text) => text_within_cap(what, text.len(), terms.max_text_bytes)
            .map_err(|e| Declined::Usage(e.to_string())),
        None => Ok(()),
    }
}

/// A worker reads its own task and its parents (whose results and summaries its brief
/// carries), nothing else.
fn readable(store: &dyn BoardWrites, bound: &Bound, task: &TaskId) -> Result<(), Declined> {
    if *task == bound.task {
        return Ok(());
    }
    let parents = store.parents(&bound.task).map_err(store_error)?;
    if parents.iter().any(|p| p.id == *task) {
        return Ok(());
    }
    Err(refused(format!(
        "this worker's report channel reads task {} and its parents only; {task} was refused",
        bound.task
    )))
}

/// A check on the bound run (a request for review, a review's or a verification's
/// verdict), guarded by it.
fn checked(
    store: &dyn BoardWrites,
    bound: &Bound,
    terms: &Terms,
    task: &TaskId,
    run: Option<RunId>,
    check: CheckReport,
    now: i64,
) -> Result<Answer, Declined> {
    own(bound, task, run)?;
    for (what, text) in check.texts() {
        capped(what, text, terms)?;
    }
    if let CheckReport::Verified { evidence, .. } = &check {
        text_within_cap("the evidence", evidence.to_string().len(), terms.max_text_bytes)
            .map_err(|e| Declined::Usage(e.to_string()))?;
    }
    let request = check.request(Some(bound.run), terms.checks);
    let ok = store.finalise(task, &request, now).map_err(store_error)?;
    Ok(Answer::Won { ok })
}
