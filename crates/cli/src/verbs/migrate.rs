//! `migrate --to URL|PATH`: copies the whole board (every table, ids kept) from the
//! home's backend into an empty board elsewhere, PostgreSQL or SQLite, and verifies the
//! counts. The source is only read; a target that is not empty is refused untouched.

use std::io::{IsTerminal, Write};

use board_core::copy::{counts_match, is_empty, BoardCopy};
use board_home::{CopyTarget, Home};
use serde_json::{json, Map, Value};

use crate::failure::Failure;
use crate::output::print_json;
use crate::verbs::Ctx;

/// Counts as `tasks 3, task_links 1, ...`.
fn listed(counts: &[(&'static str, i64)]) -> String {
    let parts: Vec<String> = counts.iter().map(|(t, n)| format!("{t} {n}")).collect();
    parts.join(", ")
}

pub fn migrate(ctx: &Ctx, home: &Home, to: &str) -> Result<(), Failure> {
    let target = CopyTarget::parse(to).map_err(|e| Failure::Usage(e.to_string()))?;
    let shown = target.shown();
    let source = home.open_copy_source(&ctx.config)?;
    let into = target.open()?;
    let before = into.row_counts()?;
    if !is_empty(&before) {
        return Err(Failure::Refused(format!(
            "{shown} is not an empty board ({}); migrate copies only into an empty one",
            listed(&before)
        )));
    }
    copy(source.as_ref(), into.as_ref())?;
    let copied = source.row_counts()?;
    let after = into.row_counts()?;
    if !counts_match(&copied, &after) {
        return Err(Failure::Refused(format!(
            "the copy at {shown} does not match: {} copied, {} there",
            listed(&copied),
            listed(&after)
        )));
    }
    let from = home.board_name(&ctx.config);
    if ctx.json {
        let tables: Map<String, Value> = after.iter().map(|(t, n)| ((*t).to_owned(), json!(n))).collect();
        print_json(&json!({"from": from, "to": shown, "tables": tables}));
    } else {
        println!("copied {from} to {shown}: {}", listed(&after));
    }
    Ok(())
}

/// Streams every row from `source` into one transaction of `into`, showing the rows
/// copied so far on a terminal.
fn copy(source: &dyn BoardCopy, into: &dyn BoardCopy) -> Result<(), Failure> {
    let progress = std::io::stderr().is_terminal();
    let mut importer = into.importer()?;
    let mut rows = 0usize;
    source.export(&mut |batch| {
        rows += batch.rows.len();
        importer.insert(batch)?;
        if progress {
            eprint!("\rcopying: {rows} rows");
            let _ = std::io::stderr().flush();
        }
        Ok(())
    })?;
    importer.commit()?;
    if progress {
        eprintln!("\rcopied: {rows} rows");
    }
    Ok(())
}
