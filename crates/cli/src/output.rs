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

    fn attribute(self, cell: comfy_table::Cell, attribute: comfy_table::Attribute) -> comfy_table::Cell {
        if self.on {
            cell.add_attribute(attribute)
        } else {
            cell
        }
    }

    /// A status as a table cell, in its colour.
    pub fn status_cell(self, status: Status) -> comfy_table::Cell {
        use comfy_table::{Attribute, Color};
        let cell = comfy_table::Cell::new(status_label(status));
        if !self.on {
            return cell;
        }
        match status {
            Status::Triage => cell.fg(Color::Magenta),
            Status::Todo => cell.fg(Color::Grey),
            Status::Ready => cell.fg(Color::Green),
            Status::Running => cell.fg(Color::Cyan),
            Status::Blocked => cell.fg(Color::Red),
            Status::Done | Status::Archived => cell.add_attribute(Attribute::Dim),
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

/// The narrowest the last column of a table is cut to.
const MIN_LAST_COLUMN: u16 = 10;

/// A table through `comfy_table`, which measures cells by their display width (a CJK
/// character is two columns) and styles a cell after laying it out, so colours never
/// count towards a width nor get cut. Every column is as wide as its widest cell but the
/// last, which is cut (ending in `…`) to the width left.
pub struct Table {
    grid: comfy_table::Table,
}

impl Table {
    pub fn new(header: &[&str], paint: Paint) -> Table {
        let mut grid = comfy_table::Table::new();
        grid.load_preset(comfy_table::presets::NOTHING)
            .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
            .set_truncation_indicator("…");
        if paint.on {
            grid.enforce_styling();
        } else {
            grid.force_no_tty();
        }
        let mut header = comfy_table::Row::from(
            header
                .iter()
                .map(|h| paint.attribute(comfy_table::Cell::new(h), comfy_table::Attribute::Bold)),
        );
        header.max_height(1);
        grid.set_header(header);
        Table { grid }
    }

    /// Adds a row of cells made by [`cell`] or [`Paint::status_cell`].
    pub fn row(&mut self, cells: Vec<comfy_table::Cell>) {
        let mut row = comfy_table::Row::from(cells);
        row.max_height(1);
        self.grid.add_row(row);
    }

    /// The table as lines of at most `total_width` columns, without trailing blanks.
    pub fn render(mut self, total_width: usize) -> String {
        let columns = self.grid.column_count();
        for (i, column) in self.grid.column_iter_mut().enumerate() {
            column.set_padding((0, if i + 1 == columns { 0 } else { 2 }));
            column.set_constraint(if i + 1 < columns {
                comfy_table::ColumnConstraint::ContentWidth
            } else {
                // A title cut below ten columns says nothing; the line overflows instead.
                comfy_table::ColumnConstraint::LowerBoundary(comfy_table::Width::Fixed(MIN_LAST_COLUMN))
            });
        }
        self.grid
            .set_width(u16::try_from(total_width).unwrap_or(u16::MAX));
        let mut out = String::new();
        for line in self.grid.lines() {
            out.push_str(&without_trailing_blanks(&line));
            out.push('\n');
        }
        out
    }

    /// Prints the table in one write (a thousand rows are one syscall, not a thousand).
    pub fn print(self, total_width: usize) {
        print!("{}", self.render(total_width));
    }
}

/// A line without the blanks at its end, also those a styled last cell pads with
/// before its closing escape sequences.
fn without_trailing_blanks(line: &str) -> String {
    let mut rest = line.trim_end();
    let mut closing = Vec::new();
    // Peel the trailing `ESC [ ... m` sequences, trim, and put them back.
    while let Some(at) = rest.rfind('\x1b') {
        let sequence = &rest[at..];
        if !(sequence.starts_with("\x1b[") && sequence.ends_with('m')) {
            break;
        }
        closing.push(sequence);
        rest = rest[..at].trim_end();
    }
    closing.reverse();
    format!("{rest}{}", closing.concat())
}

/// A plain cell: its text, control characters blanked, on one line.
pub fn cell(text: impl Into<String>) -> comfy_table::Cell {
    comfy_table::Cell::new(plain(&text.into(), false))
}

/// The time zone local times are shown in: `$TZ` when it is set, else the zone file
/// `/etc/localtime`, read once. Reading that file directly spares every command the walk
/// of the whole zoneinfo directory that a lookup of the zone by its name costs.
pub fn local_zone() -> jiff::tz::TimeZone {
    static ZONE: std::sync::OnceLock<jiff::tz::TimeZone> = std::sync::OnceLock::new();
    ZONE.get_or_init(|| {
        if std::env::var_os("TZ").is_some() {
            return jiff::tz::TimeZone::system();
        }
        std::fs::read("/etc/localtime")
            .ok()
            .and_then(|bytes| jiff::tz::TimeZone::tzif("Local", &bytes).ok())
            .unwrap_or_else(jiff::tz::TimeZone::system)
    })
    .clone()
}

/// A moment as local wall-clock time, `2026-11-30 23:04` (the system's time zone, or `$TZ`).
pub fn local_time(at: Timestamp) -> String {
    match jiff::Timestamp::from_second(at) {
        Ok(moment) => moment
            .to_zoned(local_zone())
            .strftime("%Y-%m-%d %H:%M")
            .to_string(),
        Err(_) => at.to_string(),
    }
}

/// How many rows of a task table are laid out together.
const TABLE_CHUNK: usize = 500;

/// The tasks as a table (id, status, priority, assignee, created, age, title), written
/// as the rows come: every [`TABLE_CHUNK`] rows are laid out and written together, the
/// header above the first only, so a table of any length holds one chunk in memory.
/// A table that fits one chunk is laid out whole.
pub struct TaskTable<W: std::io::Write> {
    out: W,
    rows: Vec<Task>,
    written: usize,
    now: Timestamp,
    paint: Paint,
}

impl<W: std::io::Write> TaskTable<W> {
    pub fn new(out: W, now: Timestamp, paint: Paint) -> TaskTable<W> {
        TaskTable {
            out,
            rows: Vec::new(),
            written: 0,
            now,
            paint,
        }
    }

    pub fn push(&mut self, task: Task) -> std::io::Result<()> {
        self.rows.push(task);
        if self.rows.len() == TABLE_CHUNK {
            self.flush_rows()?;
        }
        Ok(())
    }

    fn flush_rows(&mut self) -> std::io::Result<()> {
        let paint = self.paint;
        let mut table = Table::new(
            &["ID", "STATUS", "PRI", "ASSIGNEE", "CREATED", "AGE", "TITLE"],
            paint,
        );
        for t in self.rows.drain(..) {
            table.row(vec![
                cell(t.id.as_str()),
                paint.status_cell(t.status),
                cell(t.priority.to_string()),
                cell(t.assignee.as_deref().unwrap_or("-")),
                cell(local_time(t.created_at)),
                cell(age(self.now, t.created_at)),
                cell(t.title),
            ]);
        }
        let text = table.render(width());
        let body = match self.written {
            0 => text.as_str(),
            _ => text.split_once('\n').map_or("", |(_, rest)| rest),
        };
        self.written += 1;
        self.out.write_all(body.as_bytes())
    }

    /// Writes the rows still held (`no tasks` when there were none at all).
    pub fn finish(mut self) -> std::io::Result<()> {
        if !self.rows.is_empty() {
            self.flush_rows()?;
        } else if self.written == 0 {
            writeln!(self.out, "{}", self.paint.dim("no tasks"))?;
        }
        self.out.flush()
    }
}

/// The runs as a table: id, outcome, profile, started, duration, summary or error.
pub fn run_table(runs: &[Run], now: Timestamp, paint: Paint) {
    if runs.is_empty() {
        println!("{}", paint.dim("no runs"));
        return;
    }
    let mut table = Table::new(
        &["RUN", "OUTCOME", "PROFILE", "STARTED", "AGO", "TOOK", "SUMMARY"],
        paint,
    );
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
            cell(local_time(r.started_at)),
            cell(format!("{} ago", age(now, r.started_at))),
            cell(took),
            cell(note),
        ]);
    }
    table.print(width());
}

/// One event as a line: id, age, task, kind, run, payload.
pub fn event_line(e: &Event, now: Timestamp, with_task: bool, paint: Paint) -> String {
    let when = format!(
        "#{:<5} {}  {:>4} ago",
        e.id,
        local_time(e.created_at),
        age(now, e.created_at)
    );
    let mut line = format!("{}  ", paint.dim(&when));
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
    fn a_cell_is_blanked() {
        assert_eq!(cell("a\x1bb").content(), "a b");
    }

    #[test]
    fn columns_line_up_by_display_width_and_the_last_is_cut() {
        let mut table = Table::new(&["ID", "WHO", "TITLE"], Paint { on: false });
        table.row(vec![
            cell("t_1"),
            cell("山田太郎"),
            cell("a title long enough to be cut here"),
        ]);
        table.row(vec![cell("t_2"), cell("bob"), cell("short")]);
        let text = table.render(30);
        assert_eq!(
            text,
            "ID   WHO       TITLE\nt_1  山田太郎  a title lon…\nt_2  bob       short\n"
        );
    }

    #[test]
    fn coloured_cells_keep_their_escapes_whole_and_their_columns_aligned() {
        let mut table = Table::new(&["ID", "STATUS", "TITLE"], Paint { on: true });
        table.row(vec![
            cell("t_1"),
            Paint { on: true }.status_cell(Status::Running),
            cell("x"),
        ]);
        let text = table.render(40);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("\x1b["), "{text:?}");
        assert!(lines[1].contains("\x1b["), "{text:?}");
        assert!(!text.contains("[1m") || text.contains("\x1b[1m"), "{text:?}");
        // Without its escapes every line is plain text, aligned.
        let bare: String = strip(&text);
        assert_eq!(bare, "ID   STATUS     TITLE\nt_1  ▶ running  x\n");
    }

    /// Text without its CSI sequences.
    fn strip(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
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
            event_line(&event("claimed", json!({})), 1_090, false, Paint { on: false }),
            format!(
                "#7     {}    1m ago  claimed              run 3",
                local_time(1_000)
            )
        );
        assert_eq!(
            event_line(
                &event("blocked", json!({"kind": "transient"})),
                1_090,
                true,
                Paint { on: false }
            ),
            format!(
                "#7     {}    1m ago  t_1a2b3c4d  blocked              run 3    {{\"kind\":\"transient\"}}",
                local_time(1_000)
            )
        );
    }

    #[test]
    fn an_event_line_blanks_its_kind_and_cuts_its_payload() {
        let line = event_line(
            &event("odd\x1b[2J", json!({"note": "x".repeat(500)})),
            1_000,
            false,
            Paint { on: false },
        );
        assert!(line.contains("odd [2J"), "{line}");
        assert!(line.ends_with('…'), "{line}");
        let payload = line.split_once("run 3").expect("run").1.trim_start();
        assert_eq!(payload.chars().count(), 120);
    }
}
