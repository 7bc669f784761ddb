//! The verbs that print many rows: `list` and `events` (and `events --follow`). Rows are
//! written as the store yields them, never gathered first, so the memory a listing
//! holds does not grow with the board: a human table is laid out a chunk at a time,
//! `--json` writes its array element by element, `--jsonl` one object per line.

use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::time::Duration;

use board_core::shapes::{list_filter, TaskJson};
use board_core::{Event, EventFilter, Status, Task, TaskFilter};
use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};

use crate::args::{EventsArgs, ListArgs, Since, WatchArgs, EVENTS_SHOWN};
use crate::failure::Failure;
use crate::output::{event_json, event_line, TaskTable};
use crate::stop;
use crate::verbs::Ctx;

/// Writes one JSON array an element at a time, laid out exactly as
/// `serde_json::to_string_pretty` lays out the whole array: each element is serialized
/// straight into the output, one level deep, by a copy of the array's own formatter.
struct JsonArray<W: Write> {
    out: W,
    format: PrettyFormatter<'static>,
    count: usize,
}

impl<W: Write> JsonArray<W> {
    fn new(out: W) -> JsonArray<W> {
        JsonArray {
            out,
            format: PrettyFormatter::new(),
            count: 0,
        }
    }

    fn push(&mut self, value: &impl Serialize) -> std::io::Result<()> {
        let first = self.count == 0;
        if first {
            self.format.begin_array(&mut self.out)?;
        }
        self.format.begin_array_value(&mut self.out, first)?;
        // The copy carries the array's indentation; an element leaves it as it found it.
        let mut element = serde_json::Serializer::with_formatter(&mut self.out, self.format.clone());
        value.serialize(&mut element).map_err(std::io::Error::other)?;
        self.format.end_array_value(&mut self.out)?;
        self.count += 1;
        Ok(())
    }

    fn finish(mut self) -> std::io::Result<()> {
        if self.count == 0 {
            self.out.write_all(b"[]")?;
        } else {
            self.format.end_array(&mut self.out)?;
        }
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Where rows go, in the output form asked for.
enum Sink<W: Write> {
    Table(TaskTable<W>),
    Lines { out: W, human: bool, any: bool },
    Array(JsonArray<W>),
}

impl<W: Write> Sink<W> {
    fn json(out: W, lines: bool) -> Sink<W> {
        if lines {
            Sink::Lines {
                out,
                human: false,
                any: false,
            }
        } else {
            Sink::Array(JsonArray::new(out))
        }
    }

    fn line<J: Serialize>(
        &mut self,
        value: impl FnOnce() -> J,
        text: impl FnOnce() -> String,
    ) -> std::io::Result<()> {
        match self {
            Sink::Table(_) => Ok(()),
            Sink::Lines { out, human, any } => {
                *any = true;
                if *human {
                    return writeln!(out, "{}", text());
                }
                serde_json::to_writer(&mut *out, &value()).map_err(std::io::Error::other)?;
                out.write_all(b"\n")
            }
            Sink::Array(array) => array.push(&value()),
        }
    }

    fn finish(self, empty: &str) -> std::io::Result<()> {
        match self {
            Sink::Table(table) => table.finish(),
            Sink::Lines { mut out, human, any } => {
                if human && !any {
                    writeln!(out, "{empty}")?;
                }
                out.flush()
            }
            Sink::Array(array) => array.finish(),
        }
    }
}

/// The outcome of writing to stdout: a reader that went away (`| head`) ends the
/// listing quietly; any other failure is reported.
fn written(result: std::io::Result<()>) -> Result<(), Failure> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::Refused(format!("cannot write the output: {e}")))
        }
        _ => Ok(()),
    }
}

/// Hands each row to `write`, remembering the first write error and stopping there.
fn visiting<'a, T>(
    failed: &'a mut Option<std::io::Error>,
    mut write: impl FnMut(T) -> std::io::Result<()> + 'a,
) -> impl FnMut(T) -> ControlFlow<()> + 'a {
    move |row| match write(row) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            *failed = Some(e);
            ControlFlow::Break(())
        }
    }
}

/// The store's filter of `list`'s flags; `--mine` is [`super::identity::my_profile`] as an assignee.
pub fn task_filter(a: ListArgs) -> TaskFilter {
    let assignee = if a.mine {
        Some(super::identity::my_profile())
    } else {
        a.assignee
    };
    TaskFilter {
        limit: a.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        after: a.after,
        order: a.sort.unwrap_or_default(),
        tenant: a.tenant,
        ..list_filter(a.status, assignee, a.archived)
    }
}

/// The output buffer of a listing: large writes, few of them, for a long listing.
const OUT_BUFFER: usize = 64 * 1024;

pub fn list(ctx: &Ctx, a: ListArgs) -> Result<(), Failure> {
    let jsonl = a.jsonl;
    let filter = task_filter(a);
    let out = BufWriter::with_capacity(OUT_BUFFER, std::io::stdout().lock());
    let mut sink = match ctx.json || jsonl {
        true => Sink::json(out, jsonl),
        false if filter.status == Some(Status::Scheduled) => {
            Sink::Table(TaskTable::new(out, ctx.now, ctx.paint).with_until())
        }
        false => Sink::Table(TaskTable::new(out, ctx.now, ctx.paint)),
    };
    let (mut shown, mut last) = (0usize, None);
    let mut failed = None;
    let mut visit = visiting(&mut failed, |t: Task| {
        shown += 1;
        last = Some(t.id.clone());
        match &mut sink {
            Sink::Table(table) => table.push(t),
            other => other.line(|| TaskJson(&t), String::new),
        }
    });
    ctx.store.for_each_task(&filter, &mut visit)?;
    drop(visit);
    if let Some(e) = failed {
        return written(Err(e));
    }
    written(sink.finish("no tasks"))?;
    if let (Some(limit), Some(last)) = (filter.limit, last) {
        if shown == limit {
            eprintln!("kanban: the next page: --after {last}");
        }
    }
    Ok(())
}

/// The filter of `events`: the newest `--limit` (100) unless `--all`, narrowed by
/// the task, `--since`, `--kind`, `--assignee` and `--tenant`.
fn events_filter(ctx: &Ctx, a: &EventsArgs) -> EventFilter {
    let (after_id, since) = match a.since {
        Some(Since::Event(id)) => (id, None),
        Some(Since::Time(at)) => (0, Some(at)),
        Some(Since::Age(secs)) => (0, Some(ctx.now.saturating_sub(secs))),
        None => (0, None),
    };
    let limit = (!a.all).then(|| a.limit.unwrap_or(EVENTS_SHOWN));
    EventFilter {
        task_id: a.id.clone(),
        after_id,
        limit: limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        kinds: a
            .kinds
            .iter()
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect(),
        since,
        newest: !a.all,
        assignee: a.assignee.clone(),
        tenant: a.tenant.clone(),
    }
}

/// Says which of `kinds` the board never records (a typo shows nothing otherwise); they
/// still filter, since events imported from Hermes keep Hermes' own kinds.
fn warn_unknown_kinds(kinds: &[String]) {
    let unknown: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|k| k.parse::<board_core::EventKind>().is_err())
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = board_core::EventKind::ALL.iter().map(|k| k.as_str()).collect();
        eprintln!(
            "kanban: warning: kanban records no event of kind {} (only imported events may have it); its kinds: {}",
            crate::output::plain(&unknown.join(", "), false),
            known.join(", ")
        );
    }
}

pub fn events(ctx: &Ctx, a: EventsArgs) -> Result<(), Failure> {
    let poll = a.interval.unwrap_or(FOLLOW_POLL);
    events_every(ctx, a, poll)
}

/// `kanban tail ID [--interval S]`: the task's events, followed.
pub fn tail(ctx: &Ctx, id: board_core::TaskId, interval: Option<Duration>) -> Result<(), Failure> {
    let args = EventsArgs {
        id: Some(id),
        follow: true,
        all: false,
        limit: None,
        since: None,
        kinds: Vec::new(),
        assignee: None,
        tenant: None,
        interval: None,
    };
    events_every(ctx, args, interval.unwrap_or(FOLLOW_POLL))
}

/// `kanban watch [--assignee P] [--tenant T] [--kinds a,b] [--interval S]`: Hermes' verb,
/// every new event on the board (or of one assignee's or tenant's tasks, of some kinds),
/// followed.
/// Only what happens from now on is printed, none of the board's history.
pub fn watch(ctx: &Ctx, a: WatchArgs) -> Result<(), Failure> {
    let args = EventsArgs {
        id: None,
        follow: true,
        all: false,
        limit: None,
        since: Some(Since::Event(newest_event(ctx)?)),
        kinds: a.kinds,
        assignee: a.assignee,
        tenant: a.tenant,
        interval: None,
    };
    events_every(ctx, args, a.interval.unwrap_or(WATCH_POLL))
}

/// `events`, following with a read of the board every `poll`.
fn events_every(ctx: &Ctx, a: EventsArgs, poll: Duration) -> Result<(), Failure> {
    if let Some(id) = &a.id {
        ctx.store.get(id)?;
    }
    let filter = events_filter(ctx, &a);
    warn_unknown_kinds(&filter.kinds);
    let with_task = a.id.is_none();
    if a.follow {
        // Installed before the first read: a Ctrl-C from then on ends the stream cleanly.
        stop::install()?;
        return follow_events(ctx, filter, with_task, poll);
    }
    let out = BufWriter::with_capacity(OUT_BUFFER, std::io::stdout().lock());
    let mut sink = match ctx.json {
        true => Sink::json(out, false),
        false => Sink::Lines {
            out,
            human: true,
            any: false,
        },
    };
    let mut shown = 0usize;
    let mut failed = None;
    let mut visit = visiting(&mut failed, |e: Event| {
        shown += 1;
        sink.line(
            || event_json(&e),
            || event_line(&e, ctx.now, with_task, ctx.paint),
        )
    });
    ctx.store.for_each_event(&filter, &mut visit)?;
    drop(visit);
    if let Some(e) = failed {
        return written(Err(e));
    }
    written(sink.finish(&ctx.paint.dim("no events")))?;
    if !ctx.json && filter.limit == Some(shown) {
        eprintln!("kanban: the newest {shown} shown; older ones: --limit N, --since or --all");
    }
    Ok(())
}

/// How often `events --follow` asks the board for what was appended since unless
/// `--interval` says otherwise.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// How often `watch` reads the board unless `--interval` says otherwise (Hermes' 0.5 s).
const WATCH_POLL: Duration = Duration::from_millis(500);

/// Prints the events of `filter` (the newest, as `events` does), then each new one as
/// it is appended (one JSON object per line with `--json`), until SIGINT or SIGTERM,
/// or until stdout's reader goes away; either ends the command successfully, after a
/// whole line.
/// The id of the board's newest event (0 on a board with none).
fn newest_event(ctx: &Ctx) -> Result<i64, Failure> {
    let head = EventFilter {
        limit: Some(1),
        newest: true,
        ..EventFilter::default()
    };
    Ok(ctx.store.events(&head)?.last().map_or(0, |e| e.id))
}

fn follow_events(ctx: &Ctx, filter: EventFilter, with_task: bool, poll: Duration) -> Result<(), Failure> {
    let newest_before = newest_event(ctx)?;
    let mut out = std::io::stdout().lock();
    let mut next = filter.clone();
    let mut after = filter.after_id;
    loop {
        let events = ctx.store.events(&next)?;
        // Ages are of the moment each batch is printed, not of the command's start.
        let now = board_home::now();
        for e in &events {
            let line = if ctx.json {
                event_json(e).to_string()
            } else {
                event_line(e, now, with_task, ctx.paint)
            };
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return Ok(());
            }
            after = after.max(e.id);
        }
        // After the first read, everything appended since, oldest first.
        next = EventFilter {
            after_id: after.max(newest_before),
            limit: None,
            newest: false,
            ..filter.clone()
        };
        if stop::requested() {
            return Ok(());
        }
        std::thread::sleep(poll);
        if stop::requested() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::JsonArray;

    /// The streamed array is byte for byte the whole array pretty-printed at once.
    #[test]
    fn a_streamed_array_is_laid_out_as_the_whole_array() {
        let elements = [
            json!({"id": "t_1", "nested": {"list": [1, 2], "empty": {}}, "text": "two\nlines"}),
            json!([]),
            json!("plain"),
        ];
        let mut streamed = Vec::new();
        let mut array = JsonArray::new(&mut streamed);
        for element in &elements {
            array.push(element).unwrap();
        }
        array.finish().unwrap();
        let whole = format!("{}\n", serde_json::to_string_pretty(&json!(elements)).unwrap());
        assert_eq!(String::from_utf8(streamed).unwrap(), whole);

        let mut empty = Vec::new();
        JsonArray::new(&mut empty).finish().unwrap();
        assert_eq!(empty, b"[]\n");
    }
}
