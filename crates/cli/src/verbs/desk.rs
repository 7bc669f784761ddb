//! Where the worker verbs (`context`, `heartbeat`, `complete`, `block`, `comment`) read and
//! write: the board in the home, or, inside a worker that inherited one, the report
//! channel of the gateway that started it (docs/gateway.md#the-report-channel). The verbs
//! are the same either way; only the desk knows which way a call goes.
//!
//! A channel whose gateway has gone (a restart, or a `kanban dispatch` that has exited)
//! refuses before anything is sent; the desk then uses the home, which a worker of the
//! gateway's own user can open and a worker of another user cannot (its call fails with
//! one line saying both).

use std::cell::OnceCell;

use board_core::{
    Attachment, AttachmentShelf, BlockKind, BoardReads, Comment, Completion, Run, RunId, Store, Task, TaskId,
    Timestamp,
};
use board_home::config::text_within_cap;
use board_home::{Config, Home};

use gateway::channel::{Answer, CallError, Channel, CheckLimits, CheckReport, Report, Verifiers};

use crate::failure::Failure;
use crate::verbs::open_board;

/// The board a desk opened in the home.
struct Board {
    store: std::sync::Arc<dyn Store>,
    config: Config,
}

/// What the worker verbs run with.
pub struct Desk {
    /// The system clock in Unix seconds, read once per command.
    pub now: Timestamp,
    pub json: bool,
    home: Home,
    channel: Option<Channel>,
    /// Why `KANBAN_CHANNEL` named no usable channel (a subprocess that closed it).
    missing_channel: Option<String>,
    board: OnceCell<Board>,
}

impl Desk {
    /// A desk on `home`, through the report channel the process inherited when it did.
    pub fn new(home: Home, json: bool, now: Timestamp) -> Desk {
        let (channel, missing_channel) = match Channel::from_env() {
            Ok(channel) => (channel, None),
            Err(why) => (None, Some(why)),
        };
        Desk {
            now,
            json,
            home,
            channel,
            missing_channel,
            board: OnceCell::new(),
        }
    }

    /// The home's board, opened on first use. When it cannot be opened and the worker's
    /// channel was lost on the way (a subprocess that closed it), the failure says so.
    fn board(&self) -> Result<&Board, Failure> {
        if let Some(board) = self.board.get() {
            return Ok(board);
        }
        let (store, loaded, _) = open_board(&self.home).map_err(|e| match (&self.missing_channel, e) {
            (Some(why), Failure::Refused(m) | Failure::Usage(m)) => Failure::Refused(format!(
                "{m} (and {why}: a process between the worker and kanban closed it; pass the descriptor on)"
            )),
            (_, e) => e,
        })?;
        Ok(self.board.get_or_init(|| Board {
            store,
            config: loaded.config,
        }))
    }

    /// Refuses text over `kanban.max_text_bytes` before anything is sent or written; a
    /// channel's gateway checks it itself.
    pub fn within_cap(&self, what: &str, text: &str) -> Result<(), Failure> {
        if self.channel.is_some() {
            return Ok(());
        }
        let cap = self.board()?.config.kanban.max_text_bytes;
        text_within_cap(what, text.len(), cap).map_err(|e| Failure::Usage(e.to_string()))
    }

    /// Sends `report` through the channel when there is one (falling back to the home
    /// when its gateway is gone), else runs `local` on the home's board.
    fn call<T>(
        &self,
        report: impl FnOnce() -> Report,
        local: impl FnOnce(&Board) -> Result<T, Failure>,
        pick: impl FnOnce(Answer) -> Option<T>,
    ) -> Result<T, Failure> {
        let Some(channel) = &self.channel else {
            return local(self.board()?);
        };
        match channel.call(&report()) {
            Ok(Answer::Refused { message }) => Err(Failure::Refused(message)),
            Ok(Answer::Usage { message }) => Err(Failure::Usage(message)),
            Ok(answer) => pick(answer).ok_or_else(|| {
                Failure::Refused("the gateway answered the report channel with something else".to_owned())
            }),
            Err(closed @ CallError::Closed) => match self.board() {
                Ok(board) => local(board),
                Err(e) => Err(Failure::Refused(format!(
                    "{closed}, and the home cannot be used instead: {}",
                    e.message().unwrap_or("refused")
                ))),
            },
            Err(broken) => Err(Failure::Refused(broken.to_string())),
        }
    }

    /// Extends the lease of `run`, or (without a guard, for a person) of the run that
    /// holds the task now; the run it beat for, and whether it won.
    pub fn heartbeat(
        &self,
        id: &TaskId,
        run: Option<RunId>,
        note: Option<String>,
    ) -> Result<(Option<RunId>, bool), Failure> {
        let report = || Report::Heartbeat {
            task: id.clone(),
            run,
            note: note.clone(),
        };
        let local = |b: &Board| {
            let run = match run {
                Some(run) => run,
                None => {
                    let task = b.store.get(id)?;
                    task.current_run_id().ok_or_else(|| {
                        Failure::Refused(format!("task {id} is {}; heartbeat needs running", task.status))
                    })?
                }
            };
            let ttl = b.config.kanban.claim_ttl_seconds;
            let ok = b.store.heartbeat(id, run, ttl, note.clone(), self.now)?;
            Ok((Some(run), ok))
        };
        self.call(report, local, |a| match a {
            Answer::Won { ok } => Some((run, ok)),
            _ => None,
        })
    }

    pub fn complete(&self, id: &TaskId, c: &Completion) -> Result<bool, Failure> {
        let report = || Report::Complete {
            task: id.clone(),
            run: c.expected_run_id,
            replay_run: c.replay_ended_run_id,
            result: c.result.clone(),
            summary: c.summary.clone(),
            metadata: c.metadata.clone(),
            evidence: c.evidence.clone(),
        };
        let local = |b: &Board| {
            if let Some(result) = &c.result {
                text_within_cap("the result", result.len(), b.config.kanban.max_text_bytes)
                    .map_err(|e| Failure::Usage(e.to_string()))?;
            }
            Ok(b.store.complete(id, c, self.now)?)
        };
        self.call(report, local, won)
    }

    /// A check (a request for review, a review's verdict, a verify run's verdict) on
    /// `id`, guarded by `guard` (a worker's or reviewer's run; `None`: a person's).
    pub fn check(&self, id: &TaskId, guard: Option<RunId>, check: &CheckReport) -> Result<bool, Failure> {
        let report = || Report::Check {
            task: id.clone(),
            run: guard,
            check: check.clone(),
        };
        let local = |b: &Board| {
            let k = &b.config.kanban;
            for (what, text) in check.texts() {
                if let Some(text) = text {
                    text_within_cap(what, text.len(), k.max_text_bytes)
                        .map_err(|e| Failure::Usage(e.to_string()))?;
                }
            }
            let limits = CheckLimits {
                review_rounds: k.review_round_limit,
                verify_failures: k.verify_failure_limit,
            };
            let request = check.clone().request(guard, limits);
            Ok(b.store.finalise(id, &request, self.now)?)
        };
        self.call(report, local, won)
    }

    /// The verifiers a verify run of `id` runs: what the gateway that started it says,
    /// else (its channel closed) the task's own, or its profile's in the home's config.
    pub fn verifiers(&self, id: &TaskId) -> Result<Verifiers, Failure> {
        let report = || Report::Verifiers { task: id.clone() };
        let local = |b: &Board| {
            let task = b.store.get(id)?;
            let profile = task
                .assignee
                .clone()
                .unwrap_or_else(|| b.config.kanban.default_assignee.clone());
            let steps = match task.verify {
                Some(own) => own,
                None => b
                    .config
                    .profile(&profile)
                    .map(|p| p.verify.clone())
                    .unwrap_or_default(),
            };
            Ok(Verifiers {
                steps,
                timeout_seconds: b.config.kanban.verify_timeout_seconds,
            })
        };
        self.call(report, local, |a| match a {
            Answer::Verifiers { verifiers } => Some(verifiers),
            _ => None,
        })
    }

    pub fn block(
        &self,
        id: &TaskId,
        kind: Option<BlockKind>,
        reason: Option<String>,
        guard: Option<RunId>,
    ) -> Result<bool, Failure> {
        let report = || Report::Block {
            task: id.clone(),
            run: guard,
            kind,
            reason: reason.clone(),
        };
        let local = |b: &Board| Ok(b.store.block(id, kind, reason.clone(), guard, self.now)?);
        self.call(report, local, won)
    }

    /// A comment; the channel guards it with its own run, the home with `guard`.
    pub fn comment(
        &self,
        id: &TaskId,
        author: Option<&str>,
        text: &str,
        guard: Option<RunId>,
    ) -> Result<Comment, Failure> {
        let report = || Report::Comment {
            task: id.clone(),
            author: author.map(str::to_owned),
            text: text.to_owned(),
        };
        let local = |b: &Board| {
            text_within_cap("the comment", text.len(), b.config.kanban.max_text_bytes)
                .map_err(|e| Failure::Usage(e.to_string()))?;
            Ok(b.store.comment(id, author, text, guard, self.now)?)
        };
        self.call(report, local, |a| match a {
            Answer::Comment { comment } => Some(comment),
            _ => None,
        })
    }
}

fn won(answer: Answer) -> Option<bool> {
    match answer {
        Answer::Won { ok } => Some(ok),
        _ => None,
    }
}

/// What a worker's brief reads: the board itself, or the channel.
pub trait BriefReads {
    fn task(&self, id: &TaskId) -> Result<Task, Failure>;
    fn parents(&self, id: &TaskId) -> Result<Vec<Task>, Failure>;
    fn runs(&self, id: &TaskId) -> Result<Vec<Run>, Failure>;
    fn comments(&self, id: &TaskId) -> Result<Vec<Comment>, Failure>;
    /// The task's files (without their bytes).
    fn files(&self, id: &TaskId) -> Result<Vec<Attachment>, Failure>;
}

impl<S: BoardReads + AttachmentShelf + ?Sized> BriefReads for S {
    fn task(&self, id: &TaskId) -> Result<Task, Failure> {
        Ok(self.get(id)?)
    }
    fn parents(&self, id: &TaskId) -> Result<Vec<Task>, Failure> {
        Ok(BoardReads::parents(self, id)?)
    }
    fn runs(&self, id: &TaskId) -> Result<Vec<Run>, Failure> {
        Ok(BoardReads::runs(self, id)?)
    }
    fn comments(&self, id: &TaskId) -> Result<Vec<Comment>, Failure> {
        Ok(BoardReads::comments(self, id)?)
    }
    fn files(&self, id: &TaskId) -> Result<Vec<Attachment>, Failure> {
        Ok(self.attachments(id)?)
    }
}

impl BriefReads for Desk {
    fn task(&self, id: &TaskId) -> Result<Task, Failure> {
        let report = || Report::Task { task: id.clone() };
        self.call(
            report,
            |b| b.store.task(id),
            |a| match a {
                Answer::Task { task } => Some(*task),
                _ => None,
            },
        )
    }
    fn parents(&self, id: &TaskId) -> Result<Vec<Task>, Failure> {
        let report = || Report::Parents { task: id.clone() };
        self.call(
            report,
            |b| BriefReads::parents(&*b.store, id),
            |a| match a {
                Answer::Tasks { tasks } => Some(tasks),
                _ => None,
            },
        )
    }
    fn runs(&self, id: &TaskId) -> Result<Vec<Run>, Failure> {
        let report = || Report::Runs { task: id.clone() };
        self.call(
            report,
            |b| BriefReads::runs(&*b.store, id),
            |a| match a {
                Answer::Runs { runs } => Some(runs),
                _ => None,
            },
        )
    }
    fn comments(&self, id: &TaskId) -> Result<Vec<Comment>, Failure> {
        let report = || Report::Comments { task: id.clone() };
        self.call(
            report,
            |b| BriefReads::comments(&*b.store, id),
            |a| match a {
                Answer::Comments { comments } => Some(comments),
                _ => None,
            },
        )
    }
    fn files(&self, id: &TaskId) -> Result<Vec<Attachment>, Failure> {
        let report = || Report::Files { task: id.clone() };
        self.call(
            report,
            |b| BriefReads::files(&*b.store, id),
            |a| match a {
                Answer::Files { files } => Some(files),
                _ => None,
            },
        )
    }
}
