//! `gc`: retention. Removes archived tasks older than an age with everything of theirs
//! (a whole link component at a time) and the routine events of done tasks older than
//! an age, in batches that each hold the write lock briefly, then hands the space back
//! (SQLite: a WAL checkpoint) and says what it freed. Nothing is removed unless an age
//! is given, on the command line or in `config.yaml`.

use std::time::{Duration, Instant};

use board_core::{rest_after, sweep, Compacted, Pacer, Sweep, Swept};
use serde_json::json;

use crate::args::GcArgs;
use crate::failure::Failure;
use crate::output::print_json;
use crate::verbs::Ctx;

/// Rows a batch looks at first, and its bounds: a batch taking more than half the
/// budget halves the next one. The first batches read a cold board, so they start small
/// and double while they stay quick.
const FIRST_WINDOW: usize = 16;
const MIN_WINDOW: usize = 16;
const MAX_WINDOW: usize = 4096;
/// The longest a batch should hold the write lock: the pacer keeps batches between a
/// quarter and a half of it, a batch starts no new work past it (a window that grew over
/// rows with nothing to remove can meet a stretch dense with work), and the sweep rests
/// twice a batch's time after it, so a writer waiting for the lock finds it free within a
/// few of its retries.
const BATCH_BUDGET_MICROS: u64 = 20_000;

fn plural(n: u64, one: &str) -> String {
    match (n, one.ends_with('h')) {
        (1, _) => format!("{n} {one}"),
        (_, true) => format!("{n} {one}es"),
        _ => format!("{n} {one}s"),
    }
}

fn report(request: &Sweep, swept: &Swept, compacted: Option<&Compacted>) {
    let f = swept.freed;
    let verb = if request.dry_run {
        "would remove"
    } else {
        "removed"
    };
    println!(
        "{verb} {}, {}, {}, {}, {}",
        plural(f.tasks, "task"),
        plural(f.runs, "run"),
        plural(f.events, "event"),
        plural(f.comments, "comment"),
        plural(f.links, "link")
    );
    println!(
        "in {} (the longest {} ms)",
        plural(swept.batches, "batch"),
        swept.longest_batch_micros.div_ceil(1000)
    );
    if let Some(c) = compacted {
        let mut line = format!("then {}", c.action);
        if let Some(bytes) = c.wal_bytes_freed {
            line.push_str(&format!(": the log shrank by {bytes} bytes"));
        }
        if let Some(bytes) = c.reusable_bytes {
            line.push_str(&format!(", {bytes} bytes of the file free for reuse"));
        }
        println!("{line}");
    }
}

pub fn gc(ctx: &Ctx, a: GcArgs) -> Result<(), Failure> {
    let kanban = &ctx.config.kanban;
    let archived = a.archived_older_than.or(kanban.gc_archived_older_than);
    let events = a.events_older_than.or(kanban.gc_events_older_than);
    let request = Sweep {
        archived_before: archived.map(|age| ctx.now.saturating_sub(age)),
        events_before: events.map(|age| ctx.now.saturating_sub(age)),
        dry_run: a.dry_run,
    };
    if archived.is_none() && events.is_none() && !ctx.json {
        println!(
            "nothing to remove: give --archived-older-than or --events-older-than \
             (or set kanban.gc_archived_older_than, kanban.gc_events_older_than)"
        );
        return Ok(());
    }
    let mut pacer = Pacer::new(FIRST_WINDOW, MIN_WINDOW, MAX_WINDOW, BATCH_BUDGET_MICROS);
    let swept = sweep(
        ctx.store.as_ref(),
        &request,
        &mut pacer,
        Instant::now,
        &mut |batch| {
            let started = Instant::now();
            let freed = batch();
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let rest = Instant::now() + Duration::from_micros(rest_after(micros));
            // What the batch wrote is folded in now, by gc, so that the WAL never grows to
            // where the commit of a worker's `complete` would have to checkpoint it.
            let settled = match request.dry_run {
                true => Ok(()),
                false => ctx.store.settle(),
            };
            std::thread::sleep(rest.saturating_duration_since(Instant::now()));
            (freed.and_then(|f| settled.map(|()| f)), micros)
        },
    )?;
    let compacted = match request.dry_run || swept.freed.rows() == 0 {
        true => None,
        false => Some(ctx.store.compact()?),
    };
    if ctx.json {
        print_json(&json!({
            "dry_run": request.dry_run,
            "archived_older_than_seconds": archived,
            "events_older_than_seconds": events,
            "freed": swept.freed,
            "batches": swept.batches,
            "longest_batch_ms": swept.longest_batch_micros.div_ceil(1000),
            "compacted": compacted,
        }));
    } else {
        report(&request, &swept, compacted.as_ref());
    }
    Ok(())
}
