//! `link` and `unlink`: the dependencies between cards.

use board_core::TaskId;
use serde_json::json;

use crate::failure::Failure;
use crate::output::print_json;
use crate::verbs::Ctx;

pub fn link(ctx: &Ctx, parent: &TaskId, child: &TaskId) -> Result<(), Failure> {
    ctx.store.link(parent, child, ctx.now)?;
    report(ctx, "linked", parent, child);
    Ok(())
}

pub fn unlink(ctx: &Ctx, parent: &TaskId, child: &TaskId) -> Result<(), Failure> {
    ctx.store.unlink(parent, child, ctx.now)?;
    report(ctx, "unlinked", parent, child);
    Ok(())
}

fn report(ctx: &Ctx, what: &str, parent: &TaskId, child: &TaskId) {
    if ctx.json {
        print_json(&json!({ "parent_id": parent, "child_id": child }));
    } else {
        println!("{what} {parent} -> {child}");
    }
}
