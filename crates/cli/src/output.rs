//! Everything the CLI prints: the human forms (aligned tables, sections, a tiny ANSI
//! colour helper), and the JSON shapes re-exported from `board_core::shapes`, which the
//! web API prints too.

use std::fmt::Write as _;
use std::io::IsTerminal;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

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

    /// A status as a table cell, in its colour.
    pub fn status_cell(self, status: Status) -> Cell {
        let cell = Cell::new(status_label(status));
        if !self.on {
            return cell;
        }
        cell.styled(status_code(status))
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
        self.wrap(status_code(status), &status_label(status))
    }
}

/// The SGR code a status is painted in.
fn status_code(status: Status) -> &'static str {
    match status {
        Status::Triage => "35",
        Status::Todo => "37",
        Status::Ready => "32",
        Status::Running => "36",
        Status::Verifying => "34",
        Status::Review => "33",
        Status::Blocked => "31",
        Status::Scheduled => "34",
        Status::Done | Status::Archived => "2",
    }
}

/// A status as a glyph and its word, e.g. `▶ running`.
pub fn status_label(status: Status) -> String {
    let glyph = match status {
        Status::Triage => '?',
        Status::Todo => '·',
        Status::Ready => '○',
        Status::Running => '▶',
        Status::Verifying => '⧗',
        Status::Review => '◇',
        Status::Blocked => '■',
        Status::Scheduled => '◷',
        Status::Done => '✓',
        Status::Archived => '×',
    };
    format!("{glyph} {status}")
}

/// The width to fit tables into: `$COLUMNS`, else the terminal's; output that is not a
/// terminal (a pipe, a file) is never cut ([`UNLIMITED`]), so `grep` sees every title
/// whole.
pub fn width() -> usize {
    if let Some(cols) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    {
        return cols.max(40);
    }
    terminal_width().map_or(UNLIMITED, |w| w.max(40))
}

/// The width of output that is not cut at all: no column is capped, no cell shortened.
pub const UNLIMITED: usize = usize::MAX;

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
const MIN_LAST_COLUMN: usize = 10;

/// The blanks between two columns.
const GUTTER: usize = 2;

/// The widest a column other than the last gets: a longer cell (a long assignee or
/// profile) is cut, so it neither squeezes the last column to nothing nor pads every
/// line of the table with its length.
const MAX_COLUMN: usize = 32;

/// The room the last column (a title) is given before it is cut, when columns before it
/// can give way: the widest of them narrows, down to [`SQUEEZED_COLUMN`].
const WANTED_LAST: usize = 24;
const SQUEEZED_COLUMN: usize = 16;

/// One cell of a [`Table`]: its text on one line, control characters blanked, and the
/// SGR code it is painted in (none when not painted).
#[derive(Clone, Debug)]
pub struct Cell {
    text: String,
    width: usize,
    style: Option<&'static str>,
}

impl Cell {
    fn new(text: String) -> Cell {
        Cell {
            width: text.width(),
            text,
            style: None,
        }
    }

    fn styled(mut self, code: &'static str) -> Cell {
        self.style = Some(code);
        self
    }

    #[cfg(test)]
    pub fn content(&self) -> &str {
        &self.text
    }
}

/// An aligned table. Cells are measured by their display width (a CJK character is two
/// columns) and painted after they are laid out, so colours never count towards a width
/// nor get cut. Every column is as wide as its widest cell, up to [`MAX_COLUMN`] (a
/// longer cell is cut), but the last, which gets the width left (at least
/// [`MIN_LAST_COLUMN`]; the line overflows before that) and is cut there, after a whole
/// word when one fits, ending in `…`. Lines end without blanks, and no line is longer
/// than the columns' widths, whatever the cells hold.
pub struct Table {
    header: Vec<Cell>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(header: &[&str], paint: Paint) -> Table {
        let header = header
            .iter()
            .map(|h| {
                let cell = Cell::new((*h).to_owned());
                if paint.on {
                    cell.styled("1")
                } else {
                    cell
                }
            })
            .collect();
        Table {
            header,
            rows: Vec::new(),
        }
    }

    /// Adds a row of cells made by [`cell`] or [`Paint::status_cell`].
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The table as lines of at most `total_width` columns, without trailing blanks;
    /// [`UNLIMITED`] cuts nothing.
    pub fn render(self, total_width: usize) -> String {
        let columns = self.header.len();
        let cap = if total_width == UNLIMITED {
            UNLIMITED
        } else {
            MAX_COLUMN
        };
        let mut widths: Vec<usize> = self.header.iter().map(|c| c.width.min(cap)).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.width.min(cap));
            }
        }
        squeeze(&mut widths, total_width);
        let last = total_width.saturating_sub(leading(&widths)).max(MIN_LAST_COLUMN);
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let start = out.len();
            // Blanks are written only before a cell that follows, so no line ends in them.
            let mut blanks = 0;
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                let text = match i + 1 == columns {
                    true => fit(cell.text.trim_end(), last),
                    false => fit(&cell.text, *width),
                };
                if !text.is_empty() {
                    out.extend(std::iter::repeat_n(' ', blanks));
                    blanks = 0;
                    match cell.style {
                        Some(code) => {
                            let _ = write!(out, "\x1b[{code}m{text}\x1b[0m");
                        }
                        None => out.push_str(&text),
                    }
                }
                blanks += width.saturating_sub(text.width()) + GUTTER;
            }
            out.truncate(start + out[start..].trim_end_matches(' ').len());
            out.push('\n');
        }
        out
    }

    /// Prints the table in one write (a thousand rows are one syscall, not a thousand).
    pub fn print(self, total_width: usize) {
        print!("{}", self.render(total_width));
    }
}

/// The columns before the last, with their gutters.
fn leading(widths: &[usize]) -> usize {
    widths
        .iter()
        .take(widths.len().saturating_sub(1))
        .map(|w| w.saturating_add(GUTTER))
        .fold(0, usize::saturating_add)
}

/// Narrows the widest columns before the last (down to [`SQUEEZED_COLUMN`]) while the
/// last would get less than [`WANTED_LAST`] of `total_width`.
fn squeeze(widths: &mut [usize], total_width: usize) {
    let before_last = widths.len().saturating_sub(1);
    loop {
        let room = total_width.saturating_sub(leading(widths));
        if room >= WANTED_LAST {
            return;
        }
        let widest = widths[..before_last]
            .iter_mut()
            .filter(|w| **w > SQUEEZED_COLUMN)
            .max_by_key(|w| **w);
        let Some(widest) = widest else { return };
        *widest = (*widest - (WANTED_LAST - room)).max(SQUEEZED_COLUMN);
    }
}

/// `text` cut to `room` columns: after the last whole word that leaves room for the
/// `…`, or within the first word when none does.
fn fit(text: &str, room: usize) -> std::borrow::Cow<'_, str> {
    if text.width() <= room {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut used = 0;
    let mut end = 0;
    let mut word_end = None;
    for (at, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > room {
            break;
        }
        if c == ' ' && at > 0 {
            word_end = Some(at);
        }
        used += w;
        end = at + c.len_utf8();
    }
    // The word under the cut goes whole when an earlier one ends the line.
    let next_is_blank = text[end..].starts_with(' ');
    let keep = match word_end {
        Some(at) if !next_is_blank => at,
        _ => end,
    };
    std::borrow::Cow::Owned(format!("{}…", text[..keep].trim_end()))
}

/// A plain cell: its text, control characters blanked, on one line.
pub fn cell(text: impl Into<String>) -> Cell {
    Cell::new(plain(&text.into(), false))
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
/// A table that fits one chunk is laid out whole. A table of scheduled tasks says when
/// each one's time comes (UNTIL, `-` for one waiting for a person).
pub struct TaskTable<W: std::io::Write> {
    out: W,
    rows: Vec<Task>,
    written: usize,
    now: Timestamp,
    paint: Paint,
    until: bool,
}

impl<W: std::io::Write> TaskTable<W> {
    pub fn new(out: W, now: Timestamp, paint: Paint) -> TaskTable<W> {
        TaskTable {
            out,
            rows: Vec::new(),
            written: 0,
            now,
            paint,
            until: false,
        }
    }

    /// The table with an UNTIL column.
    pub fn with_until(self) -> TaskTable<W> {
        TaskTable { until: true, ..self }
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
        let headers: &[&str] = match self.until {
            true => &[
                "ID", "STATUS", "UNTIL", "PRI", "ASSIGNEE", "CREATED", "AGE", "TITLE",
            ],
            false => &["ID", "STATUS", "PRI", "ASSIGNEE", "CREATED", "AGE", "TITLE"],
        };
        let mut table = Table::new(headers, paint);
        for t in self.rows.drain(..) {
            let mut row = vec![cell(t.id.as_str()), paint.status_cell(t.status)];
            if self.until {
                let until = t.scheduled_until.map_or_else(|| "-".to_owned(), local_time);
                row.push(cell(match &t.recurrence {
                    Some(rule) => format!("{until}, then {}", rule.describe()),
                    None => until,
                }));
            }
            row.extend([
                cell(t.priority.to_string()),
                // A tenant follows its assignee in brackets, as Hermes lists it.
                cell(match &t.tenant {
                    Some(tenant) => format!("{} [{tenant}]", t.assignee.as_deref().unwrap_or("-")),
                    None => t.assignee.as_deref().unwrap_or("-").to_owned(),
                }),
                cell(local_time(t.created_at)),
                cell(age(self.now, t.created_at)),
                cell(t.title),
            ]);
            table.row(row);
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
    fn a_long_cell_is_cut_so_lines_stay_as_wide_as_the_columns() {
        let mut table = Table::new(&["ID", "ASSIGNEE", "TITLE"], Paint { on: false });
        let long = "a".repeat(1 << 20);
        for i in 0..100 {
            table.row(vec![
                cell(format!("t_{i:02}")),
                cell(long.clone()),
                cell("the title"),
            ]);
        }
        let text = table.render(80);
        let first = text.lines().nth(1).unwrap();
        assert_eq!(first, format!("t_00  {}…  the title", "a".repeat(MAX_COLUMN - 1)));
        assert!(text.lines().all(|l| l.width() <= 80), "{first}");
        assert!(text.len() < 101 * 80, "{} bytes for 100 rows", text.len());
    }

    #[test]
    fn a_long_assignee_gives_way_to_the_title_and_nothing_is_cut_unlimited() {
        let assignee = "a-very-long-profile-name-for-reviews";
        let title = "the title that people grep for in a pipe";
        let table = || {
            let mut table = Table::new(
                &["ID", "STATUS", "ASSIGNEE", "CREATED", "TITLE"],
                Paint { on: false },
            );
            table.row(vec![
                cell("t_1a2b3c4d"),
                cell("▶ running"),
                cell(assignee),
                cell("2026-12-06 13:20"),
                cell(title),
            ]);
            table
        };
        let text = table().render(80);
        let row = text.lines().nth(1).unwrap();
        assert!(row.width() <= 80, "{row}");
        assert!(row.contains("a-very-long-pro…"), "the assignee narrows: {row}");
        // 21 columns are left where a 32-column assignee left the title its minimum, 10.
        assert!(row.ends_with("  the title that…"), "the title keeps room: {row}");
        let whole = table().render(UNLIMITED);
        assert!(whole.contains(assignee) && whole.contains(title), "{whole}");
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
            "ID   WHO       TITLE\nt_1  山田太郎  a title long…\nt_2  bob       short\n"
        );
    }

    #[test]
    fn the_last_column_is_cut_after_a_whole_word_by_display_width() {
        // Ten columns left: "ship the…" fits them, a word that does not is cut inside.
        assert_eq!(fit("ship the release", 10), "ship the…");
        assert_eq!(fit("build the artefacts", 10), "build the…");
        assert_eq!(fit("unbreakableword", 10), "unbreakab…");
        assert_eq!(fit("レビュー the plan", 10), "レビュー…");
        assert_eq!(fit("レビューレビュー", 10), "レビュー…");
        assert_eq!(fit("fits exactly", 12), "fits exactly");
        let mut table = Table::new(&["ID", "TITLE"], Paint { on: false });
        table.row(vec![cell("t_1"), cell("")]);
        table.row(vec![cell(""), cell("x  ")]);
        assert_eq!(table.render(40), "ID   TITLE\nt_1\n     x\n");
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
