//! `context`: the brief a worker reads before it starts (docs/cli.md). The task's title and
//! body, each parent's result and the summary of its last completed run (this is how
//! results flow down the graph), the earlier attempts on this task, and recent comments.
//!
//! The brief goes into a model's prompt, so it is bounded: at most [`MAX_BYTES`] of
//! Markdown. Long fields are cut to a cap first; when that is not enough the oldest
//! attempts and comments are left out, then the caps shrink, then the last parents go.
//! The newest material is always what stays, and the brief says what was left out. The
//! JSON form carries exactly what the Markdown shows.

use std::fmt::Write as _;
use std::io::Write as _;

use board_core::{Attachment, Comment, Outcome, Run, RunKind, Task, TaskId, Timestamp};
use serde_json::{json, Value};

use crate::failure::{one_line, Failure};
use crate::output::{age, print_json};
use crate::verbs::desk::BriefReads;
use crate::verbs::{target, Desk, Worker};

/// The most Markdown a brief may take.
const MAX_BYTES: usize = 16 * 1024;

/// How many of the newest comments count as recent.
const RECENT_COMMENTS: usize = 20;

/// The most files a brief names.
const FILES_SHOWN: usize = 20;

/// Caps on single fields, in characters.
#[derive(Clone, Copy, Debug)]
struct Caps {
    title: usize,
    body: usize,
    /// A parent's result.
    result: usize,
    /// Summaries, errors and comments.
    note: usize,
}

const CAPS: Caps = Caps {
    title: 300,
    body: 8000,
    result: 4000,
    note: 1500,
};

/// Caps never shrink below this: a field cut shorter says nothing.
const MIN_CAP: usize = 80;

impl Caps {
    /// Every cap halved (down to [`MIN_CAP`]); `None` once nothing can shrink.
    fn halved(self) -> Option<Caps> {
        let half = |n: usize| (n / 2).max(MIN_CAP);
        let next = Caps {
            title: half(self.title),
            body: half(self.body),
            result: half(self.result),
            note: half(self.note),
        };
        let shrank = next.title < self.title
            || next.body < self.body
            || next.result < self.result
            || next.note < self.note;
        shrank.then_some(next)
    }
}

/// Everything the brief may show, read from the board.
struct Material {
    task: Task,
    /// Each parent with the summary of its last completed run.
    parents: Vec<(Task, Option<String>)>,
    /// Ended runs, oldest first (an open run is the current attempt, not an earlier one).
    attempts: Vec<Run>,
    /// The recent comments, oldest first.
    comments: Vec<Comment>,
    /// Comments older than the recent ones, never shown.
    older_comments: usize,
    /// The open run is a review: the reader reviews the work, not does it.
    reviewing: bool,
    /// The task's files (at most [`FILES_SHOWN`] of them, and how many more).
    files: (Vec<Attachment>, usize),
}

/// What goes into the brief: which items, and how long each field may be.
#[derive(Clone, Copy, Debug)]
struct Selection {
    caps: Caps,
    /// Attempts before this index are left out (the oldest).
    attempts_from: usize,
    comments_from: usize,
    /// How many parents are shown (the first ones).
    parents: usize,
}

/// A brief ready to print: the material cut to a selection.
struct Brief {
    task: Task,
    parents: Vec<(Task, Option<String>)>,
    attempts: Vec<Run>,
    comments: Vec<Comment>,
    left_out_attempts: usize,
    left_out_comments: usize,
    left_out_parents: usize,
    cut_fields: usize,
    reviewing: bool,
    files: (Vec<Attachment>, usize),
}

impl Brief {
    fn truncated(&self) -> bool {
        self.left_out_attempts + self.left_out_comments + self.left_out_parents + self.cut_fields > 0
    }
}

pub fn context(desk: &Desk, id: Option<TaskId>) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    let brief = brief(desk, id, worker.as_ref())?;
    if desk.json {
        print_json(&brief_json(&brief));
    } else {
        write_stdout(&markdown(&brief, desk.now))?;
    }
    Ok(())
}

/// The `--json` form of the brief of a task (a worker's own by default).
pub fn context_json(desk: &Desk, id: Option<TaskId>, worker: Option<&Worker>) -> Result<Value, Failure> {
    Ok(brief_json(&brief(desk, id, worker)?))
}

/// The `--json` brief of a task, read from the store: what a lane's claim hands over.
pub fn brief_of(store: &dyn board_core::Store, id: &TaskId, now: Timestamp) -> Result<Value, Failure> {
    Ok(brief_json(&fit(&gather(store, id)?, now)))
}

fn brief(desk: &Desk, id: Option<TaskId>, worker: Option<&Worker>) -> Result<Brief, Failure> {
    let (id, _) = target(id, None, worker, "context")?;
    let material = gather(desk, &id)?;
    Ok(fit(&material, desk.now))
}

/// Writes the brief; a reader that stopped early (`kanban context | head`) is not a
/// failure, and must not be a panic as `print!` would make it.
fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::Refused(format!("cannot write the brief: {e}")))
        }
        _ => Ok(()),
    }
}

fn gather(store: &(impl BriefReads + ?Sized), id: &TaskId) -> Result<Material, Failure> {
    let task = store.task(id)?;
    let mut parents = Vec::new();
    for parent in store.parents(id)? {
        let summary = store
            .runs(&parent.id)?
            .into_iter()
            .rev()
            .find(|r| r.outcome == Some(Outcome::Completed))
            .and_then(|r| r.summary);
        parents.push((parent, summary));
    }
    let (attempts, open): (Vec<Run>, Vec<Run>) =
        store.runs(id)?.into_iter().partition(|r| r.ended_at.is_some());
    let reviewing = open.iter().any(|r| r.kind == RunKind::Review);
    let mut comments = store.comments(id)?;
    let older_comments = comments.len().saturating_sub(RECENT_COMMENTS);
    comments.drain(..older_comments);
    let mut files = store.files(id)?;
    let more_files = files.len().saturating_sub(FILES_SHOWN);
    files.truncate(FILES_SHOWN);
    Ok(Material {
        files: (files, more_files),
        task,
        parents,
        attempts,
        comments,
        older_comments,
        reviewing,
    })
}

/// The fullest brief that fits in [`MAX_BYTES`] of Markdown.
fn fit(m: &Material, now: Timestamp) -> Brief {
    let fits = |s: &Selection| markdown(&cut(m, s), now).len() <= MAX_BYTES;
    let full = Selection {
        caps: CAPS,
        attempts_from: 0,
        comments_from: 0,
        parents: m.parents.len(),
    };
    // Attempts and comments together, oldest first by when they happened; leaving out
    // the first `k` of them. Fitting only gets easier as `k` grows, so a binary search
    // finds the smallest `k` without rendering the brief once per item.
    let mut oldest_first: Vec<(Timestamp, bool)> = m
        .attempts
        .iter()
        .map(|r| (r.started_at, true))
        .chain(m.comments.iter().map(|c| (c.created_at, false)))
        .collect();
    oldest_first.sort_by_key(|(at, _)| *at);
    let leaving_out = |k: usize| {
        let attempts = oldest_first[..k]
            .iter()
            .filter(|(_, is_attempt)| *is_attempt)
            .count();
        Selection {
            attempts_from: attempts,
            comments_from: k - attempts,
            ..full
        }
    };
    let (mut low, mut high) = (0, oldest_first.len());
    while low < high {
        let mid = low + (high - low) / 2;
        if fits(&leaving_out(mid)) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    let mut s = leaving_out(low);
    while !fits(&s) {
        match s.caps.halved() {
            Some(caps) => s.caps = caps,
            None => break,
        }
    }
    while !fits(&s) && s.parents > 0 {
        s.parents -= 1;
    }
    cut(m, &s)
}

/// The material cut to a selection.
fn cut(m: &Material, s: &Selection) -> Brief {
    let mut cut_fields = 0;
    let mut field = |text: &str, cap: usize| {
        let (text, was_cut) = cut_text(text, cap);
        cut_fields += usize::from(was_cut);
        text
    };
    let mut task = m.task.clone();
    task.title = field(&task.title, s.caps.title);
    task.body = field(&task.body, s.caps.body);
    let parents = m.parents[..s.parents]
        .iter()
        .map(|(parent, summary)| {
            let mut parent = parent.clone();
            parent.title = field(&parent.title, s.caps.title);
            parent.result = parent.result.as_deref().map(|r| field(r, s.caps.result));
            (parent, summary.as_deref().map(|t| field(t, s.caps.note)))
        })
        .collect();
    let attempts = m.attempts[s.attempts_from..]
        .iter()
        .map(|run| {
            let mut run = run.clone();
            run.summary = run.summary.as_deref().map(|t| field(t, s.caps.note));
            run.error = run.error.as_deref().map(|t| field(t, s.caps.note));
            // Evidence other than text is cut as its JSON text, then kept as that text.
            run.evidence = run.evidence.map(|e| match e {
                Value::String(text) => Value::String(field(&text, s.caps.note)),
                other => {
                    let text = other.to_string();
                    let shorter = field(&text, s.caps.note);
                    if shorter == text {
                        other
                    } else {
                        Value::String(shorter)
                    }
                }
            });
            run
        })
        .collect();
    let comments = m.comments[s.comments_from..]
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.body = field(&c.body, s.caps.note);
            c
        })
        .collect();
    Brief {
        task,
        parents,
        attempts,
        comments,
        left_out_attempts: s.attempts_from,
        left_out_comments: m.older_comments + s.comments_from,
        left_out_parents: m.parents.len() - s.parents,
        cut_fields,
        reviewing: m.reviewing,
        files: m.files.clone(),
    }
}

/// `text` cut to `cap` characters, saying how much was cut; and whether it was.
fn cut_text(text: &str, cap: usize) -> (String, bool) {
    let total = text.chars().count();
    if total <= cap {
        return (text.to_owned(), false);
    }
    let kept: String = text.chars().take(cap).collect();
    (format!("{kept}… [cut {} more characters]", total - cap), true)
}

fn markdown(b: &Brief, now: Timestamp) -> String {
    let mut md = String::new();
    let t = &b.task;
    // Writing to a String cannot fail.
    let _ = writeln!(md, "# {}\n", one_line(&t.title));
    let mut facts = vec![
        format!("`{}`", t.id),
        t.status.to_string(),
        format!("priority {}", t.priority),
        format!("assignee {}", t.assignee.as_deref().unwrap_or("none")),
    ];
    if let Some(run) = t.current_run_id() {
        facts.push(format!("run {run}"));
    }
    if let Some(reviewer) = &t.reviewer {
        facts.push(format!("reviewer {reviewer}"));
    }
    if let Some(tenant) = &t.tenant {
        facts.push(format!("tenant {tenant}"));
    }
    if !t.skills.is_empty() {
        facts.push(format!("load skills {}", t.skills.join(", ")));
    }
    if t.verify_failures > 0 {
        facts.push(format!("failed verifications {}", t.verify_failures));
    }
    if t.review_rounds > 0 {
        facts.push(format!("changes requested {} times", t.review_rounds));
    }
    let _ = writeln!(md, "{}\n", facts.join(" · "));
    if t.body.trim().is_empty() {
        md.push_str("_No description._\n");
    } else {
        let _ = writeln!(md, "{}", t.body.trim_end());
    }

    push_files(&mut md, b);
    push_review(&mut md, b);
    push_parents(&mut md, b);
    push_attempts(&mut md, b, now);

    if !b.comments.is_empty() {
        md.push_str("\n## Recent comments\n\n");
        for c in &b.comments {
            let author = c.author.as_deref().unwrap_or("anonymous");
            let _ = writeln!(
                md,
                "- {author}, {} ago: {}",
                age(now, c.created_at),
                indented(&c.body)
            );
        }
    }

    if b.truncated() {
        let mut left_out = Vec::new();
        let mut count = |n: usize, what: &str| {
            if n > 0 {
                left_out.push(format!("{n} {what}"));
            }
        };
        count(b.left_out_attempts, "older attempts");
        count(b.left_out_comments, "older comments");
        count(b.left_out_parents, "parents");
        let mut note = format!("\n---\n\n_Cut to fit {} KiB", MAX_BYTES / 1024);
        if !left_out.is_empty() {
            let _ = write!(note, "; left out: {}", left_out.join(", "));
        }
        if b.cut_fields > 0 {
            let _ = write!(note, "; {} long fields shortened", b.cut_fields);
        }
        note.push_str(". `kanban show` has everything._\n");
        md.push_str(&note);
    }
    md
}

/// The task's files, as its worker finds them in its workspace.
fn push_files(md: &mut String, b: &Brief) {
    let (files, more) = &b.files;
    if files.is_empty() {
        return;
    }
    md.push_str("\n## Files\n\nIn your workspace's `attachments/` directory (`kanban attach-get ID --out FILE` elsewhere):\n\n");
    for f in files {
        let kind = f.content_type.as_deref().unwrap_or("unknown type");
        let _ = writeln!(
            md,
            "- `attachments/{}` ({} bytes, {kind}; id {})",
            one_line(&f.name),
            f.size,
            f.id
        );
    }
    if *more > 0 {
        let _ = writeln!(md, "- and {more} more (`kanban attachments {}`)", b.task.id);
    }
}

/// Inside a reviewer's run: what is asked of it, and the result under review.
fn push_review(md: &mut String, b: &Brief) {
    let t = &b.task;
    if b.reviewing {
        md.push_str(
            "\n## You are reviewing this work\n\nAnother profile did this work. \
             Approve it with `kanban approve`, or send it back with `kanban request-changes REASON`; \
             the attempts below hold its summary, its evidence and any verifier output.\n",
        );
        match t.result.as_deref() {
            Some(result) if !result.trim().is_empty() => {
                let _ = writeln!(md, "\nResult reported:\n\n{}", result.trim_end());
            }
            _ => md.push_str("\nResult reported: _none_\n"),
        }
    }
}

/// The parents' results and summaries, for a worker that builds on them.
fn push_parents(md: &mut String, b: &Brief) {
    if !b.parents.is_empty() {
        md.push_str("\n## Parents\n");
        for (p, summary) in &b.parents {
            let _ = writeln!(md, "\n### {} (`{}`, {})\n", one_line(&p.title), p.id, p.status);
            match p.result.as_deref() {
                Some(result) if !result.trim().is_empty() => {
                    let _ = writeln!(md, "Result:\n\n{}", result.trim_end());
                }
                _ => md.push_str("Result: _none_\n"),
            }
            if let Some(summary) = summary {
                let _ = writeln!(md, "\nSummary: {}", indented(summary));
            }
        }
    }
}

/// The task's earlier runs: how each ended, with its summary or error.
fn push_attempts(md: &mut String, b: &Brief, now: Timestamp) {
    if !b.attempts.is_empty() {
        md.push_str("\n## Earlier attempts\n\n");
        for r in &b.attempts {
            let outcome = r.outcome.map_or("ended", |o| o.as_str());
            let kind = match r.kind {
                RunKind::Work => String::new(),
                other => format!(" ({other})"),
            };
            let mut line = format!(
                "- Run {}{kind}: {outcome}, started {} ago",
                r.id,
                age(now, r.started_at)
            );
            if let Some(profile) = &r.profile {
                let _ = write!(line, " by {profile}");
            }
            let _ = writeln!(md, "{line}");
            if let Some(summary) = &r.summary {
                let _ = writeln!(md, "  - Summary: {}", indented(summary));
            }
            if let Some(error) = &r.error {
                let _ = writeln!(md, "  - Error: {}", indented(error));
            }
            if let Some(evidence) = &r.evidence {
                let text = match evidence {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let _ = writeln!(md, "  - Evidence: {}", indented(&text));
            }
        }
    }
}

/// Continuation lines indented under a list item.
fn indented(text: &str) -> String {
    text.trim_end().replace('\n', "\n    ")
}

fn brief_json(b: &Brief) -> Value {
    let t = &b.task;
    json!({
        "task": {
            "id": t.id,
            "title": t.title,
            "body": t.body,
            "status": t.status,
            "assignee": t.assignee,
            "priority": t.priority,
            "revision": t.revision,
            "current_run_id": t.current_run_id(),
            "reviewer": t.reviewer,
            "verify_failures": t.verify_failures,
            "review_rounds": t.review_rounds,
            "tenant": t.tenant,
            "skills": t.skills,
        },
        "files": b.files.0.iter().map(|f| json!({
            "id": f.id,
            "name": f.name,
            "path": format!("attachments/{}", f.name),
            "size": f.size,
            "content_type": f.content_type,
            "sha256": f.sha256,
        })).collect::<Vec<_>>(),
        "more_files": b.files.1,
        // Inside a reviewer's run: the work under review (its result; the attempts hold
        // its summary and evidence); otherwise null.
        "review": if b.reviewing { json!({ "result": t.result }) } else { Value::Null },
        "parents": b.parents.iter().map(|(p, summary)| json!({
            "id": p.id,
            "title": p.title,
            "status": p.status,
            "result": p.result,
            "summary": summary,
        })).collect::<Vec<_>>(),
        "attempts": b.attempts.iter().map(|r| json!({
            "run_id": r.id,
            "kind": r.kind,
            "outcome": r.outcome,
            "profile": r.profile,
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "summary": r.summary,
            "error": r.error,
            "evidence": r.evidence,
        })).collect::<Vec<_>>(),
        "comments": b.comments.iter().map(|c| json!({
            "id": c.id,
            "author": c.author,
            "body": c.body,
            "created_at": c.created_at,
        })).collect::<Vec<_>>(),
        "truncated": b.truncated(),
    })
}

#[cfg(test)]
mod tests;
