//! `kanban decompose` and `kanban specify` (docs/cli.md): manual model calls on one triage
//! card or on every one. The decomposer crate does the work; this file picks the cards,
//! runs the calls on a small runtime of its own and prints one line per card.

use board_core::{BoardReads, Mode, Status, TaskFilter, TaskId};
use decompose::{Ask, DecomposeOutcome, DecomposerSettings, HttpModel};
use serde_json::Value;

use crate::args::ModelCallArgs;
use crate::failure::Failure;
use crate::output::{plain, print_json_line};

use super::Ctx;

/// Which of the two verbs runs.
#[derive(Clone, Copy, Debug)]
pub enum Call {
    Decompose,
    Specify,
}

/// Runs the verb on its cards, one after the other. Exit 0 when every card was
/// decomposed (or there was none), 1 when any was not.
pub fn run(ctx: Ctx, home: &board_home::Home, args: ModelCallArgs, call: Call) -> Result<(), Failure> {
    let settings = match call {
        Call::Decompose => ctx.config.decomposer_settings_in(home),
        Call::Specify => ctx.config.specifier_settings(),
    };
    let cards = match (args.id, args.all) {
        (Some(id), _) => vec![id],
        (None, _) => triage_cards(ctx.store.as_ref(), args.tenant)?,
    };
    let client = HttpModel::new(&settings).map_err(|e| Failure::Refused(e.to_string()))?;
    let runtime = runtime()?;
    let mut all_ok = true;
    for id in &cards {
        let outcome = call_card(&runtime, &ctx, &client, &settings, id, call, args.over_budget);
        all_ok &= outcome.ok;
        print(&outcome, ctx.json);
    }
    if cards.is_empty() && !ctx.json {
        println!("no triage cards");
    }
    if all_ok {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// `kanban decompose ID --json` as a value: the outcome when the card was decomposed, else
/// the refusal with its reason.
pub fn decompose_json(ctx: &Ctx, id: &TaskId) -> Result<Value, Failure> {
    let settings = ctx.config.decomposer_settings();
    let client = HttpModel::new(&settings).map_err(|e| Failure::Refused(e.to_string()))?;
    let outcome = call_card(&runtime()?, ctx, &client, &settings, id, Call::Decompose, false);
    if let Some(refusal) = outcome.refusal() {
        return Err(Failure::Refused(crate::failure::one_line(&refusal)));
    }
    serde_json::to_value(&outcome).map_err(|e| Failure::Refused(format!("cannot write the outcome: {e}")))
}

/// The model calls run on a small runtime of their own.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Refused(format!("cannot start the async runtime: {e}")))
}

/// One manual model call on one card.
fn call_card(
    runtime: &tokio::runtime::Runtime,
    ctx: &Ctx,
    client: &HttpModel,
    settings: &DecomposerSettings,
    id: &TaskId,
    call: Call,
    over_budget: bool,
) -> DecomposeOutcome {
    let store = ctx.store.clone();
    let clock = super::now;
    let ask = Ask {
        over_budget,
        ..Ask::from(Mode::Manual)
    };
    runtime.block_on(async {
        match call {
            Call::Decompose => decompose::decompose(store, client, id, ask, settings, &clock).await,
            Call::Specify => decompose::specify(store, client, id, ask, settings, &clock).await,
        }
    })
}

/// Every triage card, in `list` order.
fn triage_cards(store: &dyn BoardReads, tenant: Option<String>) -> Result<Vec<TaskId>, Failure> {
    let filter = TaskFilter {
        status: Some(Status::Triage),
        tenant,
        ..TaskFilter::default()
    };
    Ok(store.list(&filter)?.into_iter().map(|t| t.id).collect())
}

/// One line per card: JSON on stdout, or a sentence (failures on stderr, like every
/// other refusal).
fn print(outcome: &DecomposeOutcome, json: bool) {
    if json {
        match serde_json::to_value(outcome) {
            Ok(value) => print_json_line(&value),
            Err(e) => eprintln!("kanban: cannot print JSON: {e}"),
        }
        return;
    }
    let id = &outcome.task_id;
    if let Some(refusal) = outcome.refusal() {
        eprintln!("kanban: {}", crate::failure::one_line(&refusal));
    } else if outcome.fanout {
        let children: Vec<&str> = outcome.child_ids.iter().map(TaskId::as_str).collect();
        println!(
            "{id}: split into {} tasks: {}",
            children.len(),
            children.join(", ")
        );
    } else {
        let title = plain(outcome.new_title.as_deref().unwrap_or(""), false);
        println!("{id}: now \"{title}\"");
    }
}
