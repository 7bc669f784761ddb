//! Everything the CLI prints: the human forms (aligned tables, sections, a tiny ANSI
//! colour helper), and the JSON shapes re-exported from `board_core::shapes`, which the
//! web API prints too.

use std::io::IsTerminal;

use board_core::{Event, Run, Status, Task, Timestamp};
use serde_json::{json, Value};

pub use board_core::shapes::{age, comment_json, event_json, plain, run_json, task_json};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_blanks_escape_sequences_and_every_other_control_character() {
        let hostile = "a\x1b]0;owned\x07b\rc\x7fd\u{9b}2Je\0f\x08g";
        assert_eq!(plain(hostile, false), "a ]0;owned b c d 2Je f g");
    }

    #[test]
    fn plain_keeps_line_feeds_and_tabs_only_for_text_that_spans_lines() {
        assert_eq!(plain("one\n\ttwo\r\n", true), "one\n\ttwo \n");
        assert_eq!(plain("one\n\ttwo\r\n", false), "one  two  ");
    }

    #[test]
    fn plain_leaves_printable_text_alone() {
        let text = "ship ▶ the «release» 世界 ✓";
        assert_eq!(plain(text, false), text);
        assert_eq!(plain(text, true), text);
    }

    #[test]
    fn cut_leaves_text_that_fits() {
        assert_eq!(cut("ship it", 7), "ship it");
        assert_eq!(cut("", 3), "");
    }

    #[test]
    fn cut_text_ends_in_an_ellipsis_within_the_limit() {
        let out = cut("ship the release", 8);
        assert_eq!(out, "ship th…");
        assert_eq!(out.chars().count(), 8);
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("ééééé", 5), "ééééé");
        assert_eq!(cut("éééééé", 5), "éééé…");
    }

    #[test]
    fn cut_puts_everything_on_one_line() {
        assert_eq!(cut("one\ntwo\x1b[2J", 20), "one two [2J");
    }

    #[test]
    fn age_picks_the_largest_whole_unit() {
        let now = 1_000_000;
        let cases = [
            (0, "0s"),
            (59, "59s"),
            (60, "1m"),
            (3599, "59m"),
            (3600, "1h"),
            (86_399, "23h"),
            (86_400, "1d"),
            (30 * 86_400, "30d"),
        ];
        for (ago, expected) in cases {
            assert_eq!(age(now, now - ago), expected, "{ago} s ago");
        }
    }

    #[test]
    fn age_of_a_moment_after_now_is_zero() {
        assert_eq!(age(100, 160), "0s");
    }

    #[test]
    fn a_cell_is_blanked_and_measured_in_characters() {
        assert_eq!(cell("a\x1bb"), ("a b".to_owned(), 3));
        assert_eq!(cell("▶ é"), ("▶ é".to_owned(), 3));
    }

    #[test]
    fn a_line_pads_by_visible_width_so_coloured_cells_line_up() {
        let coloured = "\x1b[36m▶ running\x1b[0m".to_owned();
        let line = format_line(
            &["t_1".to_owned(), coloured.clone(), "x".to_owned()],
            &[3, 9, 1],
            &[5, 9, 0],
            10,
        );
        assert_eq!(line, format!("t_1    {coloured}  x\n"));
    }

    #[test]
    fn a_line_cuts_its_last_cell_to_the_width_left() {
        let line = format_line(
            &["t_1".to_owned(), "a long title to cut".to_owned()],
            &[3, 19],
            &[3, 0],
            8,
        );
        assert_eq!(line, "t_1  a long …\n");
    }

    #[test]
    fn a_line_has_no_trailing_blanks() {
        let line = format_line(&["a".to_owned(), String::new()], &[1, 0], &[4, 0], 10);
        assert_eq!(line, "a\n");
    }

    #[test]
    fn a_status_label_is_its_glyph_and_word() {
        assert_eq!(status_label(Status::Running), "▶ running");
        assert_eq!(status_label(Status::Done), "✓ done");
    }

    #[test]
    fn paint_off_adds_no_escape_codes() {
        let off = Paint { on: false };
        assert_eq!(off.bold("x"), "x");
        assert_eq!(off.status(Status::Blocked), "■ blocked");
        let on = Paint { on: true };
        assert_eq!(on.bold("x"), "\x1b[1mx\x1b[0m");
    }

    fn event(kind: &str, payload: Value) -> Event {
        Event {
            id: 7,
            task_id: "t_1a2b3c4d".parse().expect("task id"),
            run_id: Some(3),
            kind: kind.to_owned(),
            payload,
            created_at: 1_000,
        }
    }

    #[test]
    fn an_event_line_shows_a_payload_only_when_it_has_one() {
        assert_eq!(
            event_line(&event("claimed", json!({})), 1_090, false),
            "#7       1m ago  claimed              run 3"
        );
        assert_eq!(
            event_line(&event("blocked", json!({"kind": "transient"})), 1_090, true),
            "#7       1m ago  t_1a2b3c4d  blocked              run 3    {\"kind\":\"transient\"}"
        );
    }

    #[test]
    fn an_event_line_blanks_its_kind_and_cuts_its_payload() {
        let line = event_line(
            &event("odd\x1b[2J", json!({"note": "x".repeat(500)})),
            1_000,
            false,
        );
        assert!(line.contains("odd [2J"), "{line}");
        assert!(line.ends_with('…'), "{line}");
        let payload = line.split_once("run 3").expect("run").1.trim_start();
        assert_eq!(payload.chars().count(), 120);
    }
}
