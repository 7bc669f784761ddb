//! `kanban boards ...` (docs/boards.md): the boards of one home, each its own database
//! (its own schema on PostgreSQL), logs and workspaces; Hermes' verbs and lines.

use std::collections::BTreeMap;

use board_core::Store;
use board_home::{now, BoardMeta, BoardSlug, Home};
use gateway::supervisor::ProcessGroupTerminator;
use serde_json::{json, Value};

use crate::args::BoardsCommand;
use crate::failure::Failure;
use crate::output::{cell, plain, print_json, width, Paint, Table};

/// Runs a `boards` verb on the home; `flag` is the global `--board`.
pub fn run(home: &Home, json: bool, flag: Option<&str>, command: BoardsCommand) -> Result<(), Failure> {
    match command {
        BoardsCommand::List => list(home, json, flag),
        BoardsCommand::Create {
            slug,
            name,
            description,
            switch,
        } => create(home, json, &slug, (name, description), switch),
        BoardsCommand::Rm { slug, force } => remove(home, json, &slug, force),
        BoardsCommand::Rename { slug, name } => rename(home, json, &slug, &name),
        BoardsCommand::Switch { slug } => switch(home, json, &slug),
        BoardsCommand::Show => show(home, json, flag),
    }
}

fn slug(given: &str) -> Result<BoardSlug, Failure> {
    BoardSlug::parse(given).map_err(|e| Failure::Usage(e.to_string()))
}

/// The home on an existing board `given`.
fn existing(home: &Home, given: &str) -> Result<Home, Failure> {
    Ok(home.on_existing_board(slug(given)?, None)?)
}

/// A board as `--json` shows it, its tasks per status read without creating anything
/// (none for a SQLite board with no file yet).
fn shown(board: &Home, meta: &BoardMeta, current: bool) -> Result<Value, Failure> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let config = board.load_config()?.config;
    if config.database_url.is_some() || board.database().exists() {
        let (opened, _) = board.open_for_reading()?;
        for count in opened.store.status_counts()? {
            *counts.entry(count.status.as_str().to_owned()).or_insert(0) += count.tasks;
        }
    }
    Ok(json!({
        "slug": board.board(),
        "name": meta.name,
        "description": meta.description,
        "created_at": meta.created_at,
        "current": current,
        "counts": counts,
        "total": counts.values().sum::<u64>(),
        "store": board.board_name(&config),
    }))
}

fn counted(doc: &Value) -> String {
    let counts: Vec<String> = doc["counts"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(status, n)| format!("{status}={n}"))
        .collect();
    match counts.is_empty() {
        true => "(empty)".to_owned(),
        false => counts.join(", "),
    }
}

/// A display name or description: one line, within the short-text cap.
fn one_line(what: &str, text: &str) -> Result<(), Failure> {
    let cap = board_core::limits::SHORT_MAX_BYTES;
    if text.len() > cap || text.chars().any(char::is_control) {
        return Err(Failure::Usage(format!(
            "{what} must be one line of at most {cap} bytes"
        )));
    }
    Ok(())
}

/// The board commands act on: `--board`, `$KANBAN_BOARD`, the current one, the default.
fn acting(home: &Home, flag: Option<&str>) -> Result<Home, Failure> {
    Ok(home.clone().choose_board(flag)?)
}

fn list(home: &Home, json: bool, flag: Option<&str>) -> Result<(), Failure> {
    let current = acting(home, flag).map(|h| h.board().clone()).ok();
    let mut docs = Vec::new();
    for slug in home.boards()? {
        let board = home.on_board(slug);
        let is_current = current.as_ref() == Some(board.board());
        docs.push(shown(&board, &board.board_meta(), is_current)?);
    }
    if json {
        print_json(&json!(docs));
        return Ok(());
    }
    let mut table = Table::new(&["", "SLUG", "NAME", "TASKS"], Paint::for_stdout());
    for doc in &docs {
        let marker = if doc["current"] == json!(true) { "●" } else { "" };
        let text = |key: &str| plain(doc[key].as_str().unwrap_or(""), false);
        table.row(vec![
            cell(marker),
            cell(text("slug")),
            cell(text("name")),
            cell(counted(doc)),
        ]);
    }
    table.print(width());
    if let Some(current) = current {
        println!("\nCurrent board: {current}");
    }
    if docs.len() > 1 {
        println!("Switch boards with `kanban boards switch <slug>`.");
    }
    Ok(())
}

fn create(
    home: &Home,
    json: bool,
    given: &str,
    (name, description): (Option<String>, Option<String>),
    switch: bool,
) -> Result<(), Failure> {
    let board = home.on_board(slug(given)?);
    let existed = board.board_exists();
    for (what, text) in [("--name", &name), ("--description", &description)] {
        if let Some(text) = text {
            one_line(what, text)?;
        }
    }
    home.create()?;
    let mut meta = board.board_meta();
    let named = name.is_some() || description.is_some();
    if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
        meta.name = name.trim().to_owned();
    }
    if let Some(description) = description {
        meta.description = description;
    }
    if meta.created_at.is_none() || named {
        meta.created_at = meta.created_at.or(Some(now()));
        board.write_board_meta(&meta)?;
    }
    // Opening makes the board's file (or schema) and the home's config template.
    let (store, _, _) = super::open_board(&board)?;
    drop(store);
    if switch {
        home.set_current_board(board.board())?;
    }
    if json {
        let current = acting(home, None).is_ok_and(|h| h.board() == board.board());
        let mut doc = shown(&board, &meta, current)?;
        doc["created"] = json!(!existed);
        print_json(&doc);
        return Ok(());
    }
    let verb = if existed { "already exists" } else { "created" };
    let config = board.load_config()?.config;
    println!("Board '{}' {verb}.", board.board());
    println!("  Display name: {}", plain(&meta.name, false));
    println!("  Store:        {}", plain(&board.board_name(&config), false));
    match switch {
        true => println!("  Switched to '{}'.", board.board()),
        false => println!(
            "  Use `kanban boards switch {}` to make it current.",
            board.board()
        ),
    }
    Ok(())
}

fn remove(home: &Home, json: bool, given: &str, force: bool) -> Result<(), Failure> {
    let board = existing(home, given)?;
    if board.board().is_default() {
        return Err(Failure::Refused("the default board cannot be removed".into()));
    }
    let (store, loaded, _) = super::open_board(&board)?;
    let running = store.running()?;
    if !running.is_empty() && !force {
        let ids: Vec<String> = running.iter().take(5).map(|t| t.id.to_string()).collect();
        return Err(Failure::Refused(format!(
            "board {} has {} running task(s) ({}{}): let them finish, or --force reclaims them and removes it",
            board.board(),
            running.len(),
            ids.join(", "),
            if running.len() > ids.len() { ", ..." } else { "" }
        )));
    }
    reclaim_all(store.as_ref(), &running)?;
    drop(store);
    let removed = board.remove_board(&loaded.config, now())?;
    if json {
        print_json(&json!({
            "slug": board.board(),
            "action": "archived",
            "kept": removed.kept,
            "schema": removed.schema,
            "reclaimed": running.iter().map(|t| &t.id).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    for task in &running {
        println!("Reclaimed {}", task.id);
    }
    println!(
        "Board '{}' archived -> {}",
        board.board(),
        plain(&removed.kept.display().to_string(), false)
    );
    if let Some(schema) = &removed.schema {
        println!("Its schema is kept as {schema}.");
    }
    println!(
        "Recover it by moving the directory back to boards/{}/.",
        board.board()
    );
    Ok(())
}

/// Stops each running task's worker and reclaims its run, as `kanban reclaim` does.
fn reclaim_all(store: &dyn Store, running: &[board_core::Task]) -> Result<(), Failure> {
    for task in running {
        let reason = Some("its board is being removed".to_owned());
        let outcome = store.reclaim(&task.id, None, reason, &ProcessGroupTerminator, now())?;
        if outcome == board_core::ReclaimOutcome::Deferred {
            return Err(Failure::Refused(format!(
                "the worker of {} survived SIGTERM and SIGKILL; the board is kept",
                task.id
            )));
        }
    }
    Ok(())
}

fn rename(home: &Home, json: bool, given: &str, name: &str) -> Result<(), Failure> {
    let board = existing(home, given)?;
    let name = name.trim();
    one_line("a board's name", name)?;
    if name.is_empty() {
        return Err(Failure::Usage("a board's name cannot be blank".into()));
    }
    home.create()?;
    let mut meta = board.board_meta();
    meta.name = name.to_owned();
    board.write_board_meta(&meta)?;
    match json {
        true => print_json(&json!({"slug": board.board(), "name": meta.name})),
        false => println!("Board '{}' renamed to '{}'.", board.board(), plain(name, false)),
    }
    Ok(())
}

fn switch(home: &Home, json: bool, given: &str) -> Result<(), Failure> {
    let board = existing(home, given)?;
    home.set_current_board(board.board())?;
    match json {
        true => print_json(&json!({"current": board.board()})),
        false => println!("Active board is now '{}'.", board.board()),
    }
    if std::env::var_os(board_home::BOARD_VARIABLE).is_some_and(|v| !v.is_empty()) {
        eprintln!("kanban: warning: KANBAN_BOARD is set in this shell and still wins over the current board");
    }
    Ok(())
}

fn show(home: &Home, json: bool, flag: Option<&str>) -> Result<(), Failure> {
    let board = acting(home, flag)?;
    let meta = board.board_meta();
    let doc = shown(&board, &meta, true)?;
    if json {
        print_json(&doc);
        return Ok(());
    }
    println!("Current board: {}", board.board());
    println!("  Display name: {}", plain(&meta.name, false));
    if !meta.description.is_empty() {
        println!("  Description:  {}", plain(&meta.description, false));
    }
    println!(
        "  Store:        {}",
        plain(doc["store"].as_str().unwrap_or(""), false)
    );
    println!("  Tasks:        {} total ({})", doc["total"], counted(&doc));
    Ok(())
}
