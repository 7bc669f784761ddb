//! The verbs of doing the work: `claim`, `heartbeat`, `complete`, `block`, `unblock`,
//! `reclaim`. Workers call the guarded ones with their run id; a guard that names a run
//! which is no longer current loses (`ok: false`, exit 1) and changes nothing.

use board_core::{BlockKind, Completion, ReclaimOutcome, RunId, TaskId};
use serde_json::{json, Value};

use crate::args::{BlockArgs, CompleteArgs};
use crate::failure::Failure;
use crate::output::{plain, print_json, print_json_line, task_json};
use crate::verbs::desk::BriefReads;
use crate::verbs::{each_task, id_and_words, settle, target, Ctx, Desk, Worker};
use gateway::supervisor::ProcessGroupTerminator;

/// `ttl` defaults to `kanban.claim_ttl_seconds`.
pub fn claim(ctx: &Ctx, id: &TaskId, ttl: Option<i64>) -> Result<(), Failure> {
    let ttl = ttl.unwrap_or(ctx.config.kanban.claim_ttl_seconds);
    let claim = ctx.store.claim(id, ttl, ctx.now)?;
    if ctx.json {
        print_json(&json!({ "task_id": claim.task.id, "run_id": claim.run_id }));
    } else {
        println!("{}", claim.run_id);
    }
    Ok(())
}

pub fn heartbeat(
    desk: &Desk,
    id: Option<TaskId>,
    run: Option<RunId>,
    note: Option<String>,
) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    let beat = beat(desk, id, run, note, worker.as_ref())?;
    finish(desk, "heartbeat", &beat, "")
}

/// Extends the lease of a task's run: the given run, else a worker's own, else (a person
/// beating by hand) the run that holds the task now.
pub fn beat(
    desk: &Desk,
    id: Option<TaskId>,
    run: Option<RunId>,
    note: Option<String>,
    worker: Option<&Worker>,
) -> Result<Finished, Failure> {
    let (id, guard) = target(id, run, worker, "heartbeat")?;
    let (run, ok) = desk.heartbeat(&id, guard, note)?;
    Ok(Finished { id, run, ok })
}

pub fn complete(desk: &Desk, a: CompleteArgs) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    let ids: Vec<Option<TaskId>> = if a.ids.is_empty() {
        vec![None]
    } else {
        a.ids.iter().cloned().map(Some).collect()
    };
    if let Some(result) = &a.result {
        desk.within_cap("the result", result)?;
    }
    let mut refused = Vec::new();
    for id in ids {
        let (id, guard) = target(id, a.run, worker.as_ref(), "complete")?;
        let outcome =
            complete_one(desk, id, guard, false, &a).and_then(|done| finish(desk, "complete", &done, ""));
        if let Err(failure) = outcome {
            refused.push(failure);
        }
    }
    settle(refused)
}

/// Completes one task, `guard` the run it must still be running under (the target a
/// worker's `complete` resolves to); with `refuse_running`, a caller holding no run is
/// refused a running task. The result's size is checked by the caller.
pub fn complete_one(
    desk: &Desk,
    id: TaskId,
    guard: Option<RunId>,
    refuse_running: bool,
    a: &CompleteArgs,
) -> Result<Finished, Failure> {
    let completion = Completion {
        // A replay names an ended run; the guard on the current run does not apply.
        expected_run_id: if a.replay_run.is_some() { None } else { guard },
        refuse_running,
        replay_ended_run_id: a.replay_run,
        result: a.result.clone(),
        summary: a.summary.clone(),
        metadata: a.metadata.clone(),
        evidence: a.evidence.clone(),
    };
    let ok = desk.complete(&id, &completion)?;
    Ok(Finished {
        id,
        run: a.replay_run.or(guard),
        ok,
    })
}

pub fn block(desk: &Desk, a: BlockArgs) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    let (id, words) = id_and_words(&a.words, worker.is_some())?;
    let reason = (!words.is_empty()).then(|| words.join(" "));
    // Hermes' line: `Blocked ID: REASON`.
    let said = reason
        .as_deref()
        .map_or_else(String::new, |r| format!(": {}", plain(r, false)));
    let blocked = block_one(desk, id, reason.clone(), a.kind, a.run, worker.as_ref());
    let mut refused: Vec<Failure> = blocked
        .and_then(|b| finish(desk, "block", &b, &said))
        .err()
        .into_iter()
        .collect();
    for id in a.ids {
        let outcome = block_one(desk, Some(id), reason.clone(), a.kind, None, None);
        if let Err(failure) = outcome.and_then(|b| finish(desk, "block", &b, &said)) {
            refused.push(failure);
        }
    }
    settle(refused)
}

/// Blocks a task (a worker's own by default, guarded by its run).
pub fn block_one(
    desk: &Desk,
    id: Option<TaskId>,
    reason: Option<String>,
    kind: Option<BlockKind>,
    run: Option<RunId>,
    worker: Option<&Worker>,
) -> Result<Finished, Failure> {
    let (id, guard) = target(id, run, worker, "block")?;
    let ok = desk.block(&id, kind, reason, guard)?;
    Ok(Finished { id, run: guard, ok })
}

pub fn unblock(ctx: &Ctx, ids: Vec<TaskId>, reason: Option<String>) -> Result<(), Failure> {
    each_task(
        ctx,
        ids,
        |id| ctx.store.unblock(id, reason.clone(), ctx.now),
        |_, task| task_json(task),
        |_, task| match &reason {
            Some(reason) => format!("Unblocked {}: {}", task.id, plain(reason, false)),
            None => format!("Unblocked {}", task.id),
        },
    )
}

pub fn reclaim(ctx: &Ctx, id: &TaskId, run: Option<RunId>, reason: Option<String>) -> Result<(), Failure> {
    let outcome = ctx
        .store
        .reclaim(id, run, reason, &ProcessGroupTerminator, ctx.now)?;
    let word = match outcome {
        ReclaimOutcome::Reclaimed => "reclaimed",
        ReclaimOutcome::Deferred => "deferred",
        ReclaimOutcome::Lost => "lost",
    };
    let ok = outcome == ReclaimOutcome::Reclaimed;
    if ctx.json {
        print_json_line(&json!({ "task_id": id, "ok": ok, "outcome": word }));
    } else if ok {
        println!("Reclaimed {id}");
    }
    match outcome {
        ReclaimOutcome::Reclaimed => Ok(()),
        ReclaimOutcome::Deferred => Err(Failure::Refused(format!(
            "the worker of {id} survived SIGTERM and SIGKILL; the claim stands (extended briefly)"
        ))),
        ReclaimOutcome::Lost => Err(lost(ctx.store.as_ref(), "reclaim", id, run)),
    }
}

/// What a guarded finaliser (heartbeat, complete, block) did to one task: `ok` false
/// when its guard named a run that is no longer current, and nothing changed.
pub struct Finished {
    pub id: TaskId,
    /// The run the guard named, for the message of a loss.
    pub run: Option<RunId>,
    pub ok: bool,
}

impl Finished {
    /// The `--json` line: `{"task_id", "ok"}`.
    pub fn to_json(&self) -> Value {
        json!({ "task_id": self.id, "ok": self.ok })
    }

    /// A loss as the refusal `kanban` exits 1 with.
    pub fn won(&self, board: &(impl BriefReads + ?Sized), verb: &str) -> Result<(), Failure> {
        if self.ok {
            Ok(())
        } else {
            Err(lost(board, verb, &self.id, self.run))
        }
    }
}

/// Prints a finaliser's `{"task_id", "ok"}` (or Hermes' line for people, `said` after the
/// id) and turns a loss into exit 1.
fn finish(desk: &Desk, verb: &str, f: &Finished, said: &str) -> Result<(), Failure> {
    if desk.json {
        print_json_line(&f.to_json());
    } else if f.ok {
        let done = match verb {
            "complete" => "Completed",
            "block" => "Blocked",
            "heartbeat" => "Heartbeat recorded for",
            other => other,
        };
        println!("{done} {}{said}", f.id);
    }
    f.won(desk, verb)
}

/// Says which run took over, reading the task once more (after the fact, for the message only).
fn lost(board: &(impl BriefReads + ?Sized), verb: &str, id: &TaskId, run: Option<RunId>) -> Failure {
    let current = match board.task(id) {
        Ok(task) => task
            .current_run_id()
            .map_or_else(|| "none".to_owned(), |r| r.to_string()),
        Err(_) => "unknown".to_owned(),
    };
    let named = run.map_or_else(|| "the run read".to_owned(), |r| format!("run {r}"));
    Failure::Refused(format!(
        "{verb} of {id} lost: {named} is not the current run (current: {current}); nothing changed"
    ))
}
