//! `link` and `unlink`: the dependencies between cards.

use board_core::TaskId;
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::output::print_json;
use crate::verbs::Ctx;

pub fn link(ctx: &Ctx, parent: &TaskId, child: &TaskId) -> Result<(), Failure> {
    linked(ctx, parent, child)?;
    report(ctx, "Linked", parent, child);
    Ok(())
}

/// Links the two tasks; answers with the `--json` of `link`.
pub fn linked(ctx: &Ctx, parent: &TaskId, child: &TaskId) -> Result<Value, Failure> {
    ctx.store.link(parent, child, ctx.now)?;
    Ok(link_json(parent, child))
}

pub fn unlink(ctx: &Ctx, parent: &TaskId, child: &TaskId) -> Result<(), Failure> {
    ctx.store.unlink(parent, child, ctx.now)?;
    report(ctx, "Unlinked", parent, child);
    Ok(())
}

/// The `--json` answer of `link` and `unlink`.
fn link_json(parent: &TaskId, child: &TaskId) -> Value {
    json!({ "parent_id": parent, "child_id": child })
}

fn report(ctx: &Ctx, what: &str, parent: &TaskId, child: &TaskId) {
    if ctx.json {
        print_json(&link_json(parent, child));
    } else {
        println!("{what} {parent} -> {child}");
    }
}
