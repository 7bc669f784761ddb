//! The flags of the verbs that read or trim a large board: `list`, `events`, `gc`.

use board_core::{Status, TaskId, TaskOrder};
use clap::Args;

use super::parse_duration;

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tasks in this status
    #[arg(long, value_name = "STATUS", value_parser = super::statuses())]
    pub status: Option<Status>,
    /// Only tasks assigned to PROFILE, or with `none` the unassigned ones
    #[arg(long, value_name = "PROFILE|none", conflicts_with = "mine")]
    pub assignee: Option<String>,
    /// Only tasks assigned to you: $KANBAN_PROFILE, else $HERMES_PROFILE, else $USER,
    /// $LOGNAME or the uid
    #[arg(long)]
    pub mine: bool,
    /// Include archived tasks
    #[arg(long)]
    pub archived: bool,
    /// Only tasks of this tenant
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// The order: priority (claim order, the default), priority-desc (lowest first),
    /// created (oldest first), created-desc (newest first), updated (latest change
    /// first), title, status (triage first, then claim order) or assignee (unassigned
    /// first)
    #[arg(long, value_name = "FIELD", value_parser = super::orders())]
    pub sort: Option<TaskOrder>,
    /// At most N tasks (a page); the next page starts after the last one shown
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Only the tasks after task ID in the list's order (the cursor of the next page)
    #[arg(long, value_name = "ID")]
    pub after: Option<TaskId>,
    /// One JSON object per line instead of one array
    #[arg(long)]
    pub jsonl: bool,
}

/// How many events `events` shows without `--all` or `--limit`.
pub const EVENTS_SHOWN: u64 = 100;

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only this task's events
    #[arg(value_name = "ID")]
    pub id: Option<TaskId>,
    /// Keep printing new events as they happen, until Ctrl-C, SIGINT or SIGTERM
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Every matching event, oldest first, instead of the newest ones
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
    /// The newest N matching events [default: 100]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Only events after event id N, or at or after a time (2026-12-01T08:00:00Z,
    /// "2026-12-01 08:00" local time, or an age such as 2h)
    #[arg(long, value_name = "TIME|EVENT_ID", value_parser = parse_since)]
    pub since: Option<Since>,
    /// Only events of these kinds (claimed, completed, heartbeat, ...): a list
    /// (`--kind claimed,completed`) or the flag again
    #[arg(long = "kind", value_name = "KIND[,KIND...]", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Only events of the tasks assigned to PROFILE now
    #[arg(long, value_name = "PROFILE")]
    pub assignee: Option<String>,
    /// Only events of the tasks of this tenant
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// With --follow: read the board every S seconds (0.05 to 60) [default: 0.2]
    #[arg(long, value_name = "S", value_parser = super::parse_interval, requires = "follow")]
    pub interval: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct DiagnosticsArgs {
    /// Only findings of this severity or worse
    #[arg(long, value_name = "SEVERITY", value_enum)]
    pub severity: Option<crate::verbs::Severity>,
    /// Only the findings about this task
    #[arg(long, value_name = "ID")]
    pub task: Option<TaskId>,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only events of the tasks assigned to PROFILE now
    #[arg(long, value_name = "PROFILE")]
    pub assignee: Option<String>,
    /// Only events of the tasks of this tenant
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// Only events of these kinds, e.g. completed,blocked,gave_up,crashed,timed_out
    #[arg(long, value_name = "KIND[,KIND...]", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Seconds between reads of the board, 0.05 to 60 [default: 0.5]
    #[arg(long, value_name = "S", value_parser = super::parse_interval)]
    pub interval: Option<std::time::Duration>,
}

/// Where `events --since` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    /// After this event id.
    Event(i64),
    /// At or after this moment (Unix seconds).
    Time(i64),
    /// At or after this long before now.
    Age(i64),
}

/// `42` is an event id; `2h` an age; anything else a moment, RFC 3339 or local
/// `YYYY-MM-DD HH:MM[:SS]`.
pub fn parse_since(text: &str) -> Result<Since, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Since::Event)
            .map_err(|_| format!("not an event id: {text:?}"));
    }
    if let Ok(age) = parse_duration(text) {
        return Ok(Since::Age(age));
    }
    parse_moment(text).map(Since::Time).map_err(|_| {
        format!("not a time or event id: {text:?} (expected e.g. 2026-12-01T08:00:00Z, \"2026-12-01 08:00\", 2h or 42)")
    })
}

/// A moment as Unix seconds: RFC 3339 (`2026-12-01T08:00:00Z`) or local
/// `YYYY-MM-DD HH:MM[:SS]`.
pub fn parse_moment(text: &str) -> Result<i64, String> {
    if let Ok(moment) = text.parse::<jiff::Timestamp>() {
        return Ok(moment.as_second());
    }
    let civil = text.parse::<jiff::civil::DateTime>().map_err(|_| {
        format!("not a time: {text:?} (expected e.g. 2026-12-01T08:00:00Z or \"2026-12-01 08:00\")")
    })?;
    civil
        .to_zoned(crate::output::local_zone())
        .map(|z| z.timestamp().as_second())
        .map_err(|e| format!("not a time here: {text:?} ({e})"))
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Say what would be removed, and remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Remove archived tasks (with their runs, events, comments and links) last changed
    /// longer ago than DUR [default: kanban.gc_archived_older_than, else none]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub archived_older_than: Option<i64>,
    /// Remove the routine events (heartbeats, edits, ...) of done tasks older than DUR
    /// [default: kanban.gc_events_older_than, else none]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub events_older_than: Option<i64>,
}
