//! Everything the CLI prints: the JSON shapes (stable key order) and the human forms
//! (aligned tables, sections, a tiny ANSI colour helper).
//!
//! JSON objects are built key by key (serde_json keeps insertion order), so their shape
//! is a contract written down here rather than whatever the structs derive.

use std::io::IsTerminal;

use board_core::{Comment, Event, Run, Status, Task, Timestamp};
use serde_json::{json, Value};

/// A task as JSON: every `tasks` column except the lease internals (`claim_lock`,
/// `claim_expires`, `worker_pid`, `last_heartbeat_at`), in column order.
pub fn task_json(t: &Task) -> Value {
    json!({
        "id": t.id,
        "title": t.title,
        "body": t.body,
        "assignee": t.assignee,
        "status": t.status,
        "priority": t.priority,
        "created_by": t.created_by,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "started_at": t.started_at,
        "completed_at": t.completed_at,
        "result": t.result,
        "current_run_id": t.current_run_id(),
        "block_kind": t.block_kind,
        "block_recurrences": t.block_recurrences,
        "consecutive_failures": t.consecutive_failures,
        "last_failure_error": t.last_failure_error,
        "max_runtime_seconds": t.max_runtime_seconds,
        "idempotency_key": t.idempotency_key,
        "revision": t.revision,
        "decompose_failures": t.decompose_failures,
        "decompose_next_attempt_at": t.decompose_next_attempt_at,
        "decompose_parked": t.decompose_parked,
        "decompose_last_error": t.decompose_last_error,
    })
}

/// A run as JSON: every `task_runs` column except `claim_lock`, the token a guard
/// compares and nobody needs to read.
pub fn run_json(r: &Run) -> Value {
    json!({
        "id": r.id,
        "task_id": r.task_id,
        "profile": r.profile,
        "status": r.status,
        "outcome": r.outcome,
        "claim_expires": r.claim_expires,
        "worker_pid": r.worker_pid,
        "last_heartbeat_at": r.last_heartbeat_at,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "summary": r.summary,
        "error": r.error,
        "metadata": r.metadata,
    })
}

pub fn comment_json(c: &Comment) -> Value {
    json!({
        "id": c.id,
        "task_id": c.task_id,
        "author": c.author,
        "body": c.body,
        "created_at": c.created_at,
    })
}

pub fn event_json(e: &Event) -> Value {
    json!({
        "id": e.id,
        "task_id": e.task_id,
        "run_id": e.run_id,
        "kind": e.kind,
        "payload": e.payload,
        "created_at": e.created_at,
    })
}

/// Prints one JSON document on its own line.
pub fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        // A Value with string keys always serialises; say so rather than print nothing.
        Err(e) => eprintln!("kanban: cannot print JSON: {e}"),
    }
}

/// Prints one JSON object per line (finalisers acting on several tasks).
pub fn print_json_line(value: &Value) {
    println!("{value}");
}

/// Colours for a terminal, or nothing at all.
#[derive(Clone, Copy, Debug)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// On only when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout() -> Paint {
        Paint {
            on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    pub fn status(self, status: Status) -> String {
        let code = match status {
            Status::Triage => "35",
            Status::Todo => "37",
            Status::Ready => "32",
            Status::Running => "36",
            Status::Blocked => "31",
            Status::Done => "2",
            Status::Archived => "2",
        };
        self.wrap(code, &status_label(status))
    }
}

/// A status as a glyph and its word, e.g. `▶ running`.
pub fn status_label(status: Status) -> String {
    let glyph = match status {
        Status::Triage => '?',
        Status::Todo => '·',
        Status::Ready => '○',
        Status::Running => '▶',
        Status::Blocked => '■',
        Status::Done => '✓',
        Status::Archived => '×',
    };
    format!("{glyph} {status}")
}

/// How long ago `then` was, in one short unit: `42s`, `5m`, `3h`, `2d`.
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = (now - then).max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The width to fit tables into: `$COLUMNS`, else the terminal's, else 100.
pub fn width() -> usize {
    if let Some(cols) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    {
        return cols.max(40);
    }
    terminal_width().unwrap_or(100).max(40)
}

fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the pointer we own.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(size.ws_col as usize)
}

/// Text from the board as it may reach a terminal. Card text, results, comments,
/// authors and worker logs are untrusted: an escape sequence in them could retitle the
/// terminal, clear it or fake output. Every control character (ESC, and so every CSI and
/// OSC sequence; BEL; CR; the rest of C0, DEL and C1) becomes a space; with `lines`, line
/// feeds and tabs are kept for text meant to span lines (a body, a result). JSON output
/// never goes through here: its encoder escapes control characters itself.
pub fn plain(text: &str, lines: bool) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' if lines => c,
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// Cuts `text` to at most `max` characters (ending in `…` when cut), on one line.
pub fn cut(text: &str, max: usize) -> String {
    let flat = plain(text, false);
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A table whose columns are padded to their widest cell; the last column is cut to
/// whatever width is left.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Cells already coloured carry escape codes; their visible widths are kept here.
    visible: Vec<Vec<usize>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            visible: Vec::new(),
        }
    }

    /// Adds a row of `(text as printed, visible width)` cells.
    pub fn row(&mut self, cells: Vec<(String, usize)>) {
        let (text, widths) = cells.into_iter().unzip();
        self.rows.push(text);
        self.visible.push(widths);
    }

    pub fn print(&self, paint: Paint, total_width: usize) {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.visible {
            for (i, w) in row.iter().enumerate().take(n.saturating_sub(1)) {
                widths[i] = widths[i].max(*w);
            }
        }
        let used: usize = widths.iter().take(n.saturating_sub(1)).map(|w| w + 2).sum();
        let last = total_width.saturating_sub(used).max(10);
        let header: Vec<String> = self.header.iter().map(|h| paint.bold(h)).collect();
        let header_visible: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        // One write for the whole table: a thousand rows are one syscall, not a thousand.
        let mut out = format_line(&header, &header_visible, &widths, last);
        for (row, vis) in self.rows.iter().zip(&self.visible) {
            out.push_str(&format_line(row, vis, &widths, last));
        }
        print!("{out}");
    }
}

fn format_line(cells: &[String], visible: &[usize], widths: &[usize], last: usize) -> String {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i + 1 == cells.len() {
            line.push_str(&cut(cell, last));
        } else {
            line.push_str(cell);
            let pad = widths[i].saturating_sub(visible[i]) + 2;
            line.push_str(&" ".repeat(pad));
        }
    }
    let mut line = line.trim_end().to_owned();
    line.push('\n');
    line
}

/// A plain cell: its text (control characters blanked) and its visible width.
pub fn cell(text: impl Into<String>) -> (String, usize) {
    let text = plain(&text.into(), false);
    let width = text.chars().count();
    (text, width)
}

/// The tasks as a table: id, status, priority, assignee, age, title.
pub fn task_table(tasks: &[Task], now: Timestamp, paint: Paint) {
    if tasks.is_empty() {
        println!("{}", paint.dim("no tasks"));
        return;
    }
    let mut table = Table::new(&["ID", "STATUS", "PRI", "ASSIGNEE", "AGE", "TITLE"]);
    for t in tasks {
        let label = status_label(t.status);
        table.row(vec![
            cell(t.id.as_str()),
            (paint.status(t.status), label.chars().count()),
            cell(t.priority.to_string()),
            cell(t.assignee.as_deref().unwrap_or("-")),
            cell(age(now, t.created_at)),
            cell(t.title.clone()),
        ]);
    }
    table.print(paint, width());
}

/// The runs as a table: id, outcome, profile, started, duration, summary or error.
pub fn run_table(runs: &[Run], now: Timestamp, paint: Paint) {
    if runs.is_empty() {
        println!("{}", paint.dim("no runs"));
        return;
    }
    let mut table = Table::new(&["RUN", "OUTCOME", "PROFILE", "STARTED", "TOOK", "SUMMARY"]);
    for r in runs {
        let outcome = match r.outcome {
            Some(o) => o.as_str().to_owned(),
            None => "running".to_owned(),
        };
        let took = age(r.ended_at.unwrap_or(now), r.started_at);
        let note = r.summary.as_deref().or(r.error.as_deref()).unwrap_or("");
        table.row(vec![
            cell(r.id.to_string()),
            cell(outcome),
            cell(r.profile.as_deref().unwrap_or("-")),
            cell(format!("{} ago", age(now, r.started_at))),
            cell(took),
            cell(note),
        ]);
    }
    table.print(paint, width());
}

/// One event as a line: id, age, task, kind, run, payload.
pub fn event_line(e: &Event, now: Timestamp, with_task: bool) -> String {
    let mut line = format!("#{:<5} {:>4} ago  ", e.id, age(now, e.created_at));
    if with_task {
        line.push_str(e.task_id.as_str());
        line.push_str("  ");
    }
    let run = e.run_id.map_or_else(String::new, |r| format!("run {r}"));
    line.push_str(&format!("{:<20} {run:<8}", plain(&e.kind, false)));
    if !e.payload.is_null() && e.payload != json!({}) {
        line.push(' ');
        line.push_str(&cut(&e.payload.to_string(), 120));
    }
    line.trim_end().to_owned()
}
