//! `kanban import-hermes PATH`: a Hermes board read page by page (never written) and
//! brought in through `Store::import`, one transaction per page, tasks first and then
//! the links among the tasks that came over; then a report of what came over and what
//! did not.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::path::Path;

use board_core::shapes::plain;
use board_core::{ImportBatch, ImportedTask, Landed, LinkLanded, TaskId};
use board_sqlite::hermes::{Counts, HermesBoard, LinkPage, Skipped};
use serde::Serialize;
use serde_json::json;

use board_home::{BoardMeta, BoardSlug, Home};

use super::Ctx;
use crate::failure::Failure;
use crate::output::print_json;

/// Tasks (with their history) or links per transaction.
const PAGE: usize = 200;
/// Boards with more rows than this get a progress line on a terminal.
const LARGE: u64 = 1000;
/// Rows of the "not brought over" list printed for people; `--json` has them all.
const LISTED: usize = 20;

/// What came over and what did not.
#[derive(Default, Serialize)]
struct Report {
    source: String,
    hermes: Counts,
    tasks_imported: u64,
    tasks_present: u64,
    runs: u64,
    events: u64,
    comments: u64,
    links_added: u64,
    links_present: u64,
    /// `hermes status -> status` for every status that did not map one to one.
    statuses_mapped: std::collections::BTreeMap<String, u64>,
    /// Tasks that came over without their idempotency key (another task holds it).
    keys_left_off: Vec<TaskId>,
    /// Rows that did not come over, each with its reason.
    not_imported: Vec<Skipped>,
}

/// `kanban import-hermes PATH`: a Hermes board file into this board, or, for a Hermes
/// root directory (`~/.hermes`), every Hermes board into the board of the same slug here
/// (its `kanban.db` into `default`, each `kanban/boards/SLUG/kanban.db` into `SLUG`, made
/// when missing).
pub fn import_hermes(ctx: &Ctx, home: &Home, path: &Path) -> Result<(), Failure> {
    if !path.is_dir() {
        let report = import_board(ctx, path)?;
        print_report(ctx, report, &waiting(ctx)?);
        let others = hermes_boards(path.parent().unwrap_or(Path::new(".")));
        if !others.is_empty() && !ctx.json {
            let slugs: Vec<&str> = others.iter().map(|(slug, _)| slug.as_str()).collect();
            println!(
                "Hermes has {} more board(s) beside it ({}): `kanban import-hermes {}` imports every board",
                slugs.len(),
                plain(&slugs.join(", "), false),
                plain(
                    &path.parent().unwrap_or(Path::new(".")).display().to_string(),
                    false
                )
            );
        }
        return Ok(());
    }
    let mut boards = vec![(BoardSlug::default_board(), path.join(board_home::DATABASE_FILE))];
    boards.extend(hermes_boards(path));
    boards.retain(|(_, file)| file.is_file());
    if boards.is_empty() {
        return Err(Failure::Refused(format!(
            "{}: no Hermes board here (no kanban.db, no kanban/boards/SLUG/kanban.db)",
            plain(&path.display().to_string(), false)
        )));
    }
    let mut reports = Vec::new();
    for (slug, file) in boards {
        let board = home.on_board(slug.clone());
        if !board.board_exists() {
            board.write_board_meta(&BoardMeta {
                name: slug.title(),
                created_at: Some(ctx.now),
                ..BoardMeta::default()
            })?;
        }
        let (store, loaded, _) = super::open_board(&board)?;
        let on_board = Ctx {
            store,
            config: loaded.config,
            now: ctx.now,
            json: ctx.json,
            paint: ctx.paint,
        };
        let report = import_board(&on_board, &file)?;
        if !ctx.json {
            println!("Board {slug}:");
            print_report(&on_board, report, &waiting(&on_board)?);
        } else {
            let mut shown = json!(report);
            shown["board"] = json!(slug);
            reports.push(shown);
        }
    }
    if ctx.json {
        print_json(&json!({ "boards": reports }));
    }
    Ok(())
}

/// The boards of a Hermes root but its default: `kanban/boards/SLUG/kanban.db`.
fn hermes_boards(root: &Path) -> Vec<(BoardSlug, std::path::PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root.join("kanban").join("boards")) else {
        return Vec::new();
    };
    let mut found: Vec<(BoardSlug, std::path::PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let slug = BoardSlug::parse(&name)
                .ok()
                .filter(|s| s.as_str() == name && !s.is_default())?;
            let file = entry.path().join(board_home::DATABASE_FILE);
            file.is_file().then_some((slug, file))
        })
        .collect();
    found.sort();
    found
}

/// Profiles the imported tasks are assigned to that this home cannot run.
fn waiting(ctx: &Ctx) -> Result<Vec<super::profiles::Unrunnable>, Failure> {
    Ok(super::profiles::unrunnable(ctx.store.as_ref(), &ctx.config)?)
}

fn print_report(ctx: &Ctx, report: Report, waiting: &[super::profiles::Unrunnable]) {
    if ctx.json {
        let mut shown = json!(report);
        shown["profiles_without_command"] = super::profiles::to_json(waiting);
        print_json(&shown);
    } else {
        report.print();
        for line in super::profiles::lines(waiting) {
            eprintln!("kanban: warning: {line}");
        }
    }
}

/// One Hermes board file into `ctx`'s board.
fn import_board(ctx: &Ctx, path: &Path) -> Result<Report, Failure> {
    let hermes = HermesBoard::open(path, ctx.config.kanban.max_text_bytes)
        .map_err(|e| Failure::Refused(e.to_string()))?;
    let refused = |e: board_sqlite::hermes::HermesError| Failure::Refused(e.to_string());
    let mut report = Report {
        source: path.display().to_string(),
        hermes: hermes.counts().map_err(refused)?,
        ..Report::default()
    };
    let mut progress = Progress::new(report.hermes.tasks + report.hermes.links);
    let mut on_board = HashSet::new();
    let mut after = 0;
    loop {
        let page = hermes.tasks(after, PAGE, ctx.now).map_err(refused)?;
        report.not_imported.extend(page.skipped);
        let batch = ImportBatch {
            tasks: page.tasks,
            links: Vec::new(),
        };
        let outcome = ctx.store.import(&batch, ctx.now)?;
        for (incoming, landed) in batch.tasks.iter().zip(outcome.tasks) {
            report.task(incoming, landed, &mut on_board);
        }
        progress.advance(batch.tasks.len() as u64, "tasks");
        match page.next {
            Some(next) => after = next,
            None => break,
        }
    }
    import_links(ctx, &hermes, &on_board, &mut report, &mut progress)?;
    progress.finish();
    Ok(report)
}

fn import_links(
    ctx: &Ctx,
    hermes: &HermesBoard,
    on_board: &HashSet<TaskId>,
    report: &mut Report,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let mut after = (String::new(), String::new());
    loop {
        let LinkPage { links, skipped, next } = hermes
            .links(&after, PAGE)
            .map_err(|e| Failure::Refused(e.to_string()))?;
        report.not_imported.extend(skipped);
        let read = links.len() as u64;
        let (links, stranded): (Vec<_>, Vec<_>) = links
            .into_iter()
            .partition(|l| on_board.contains(&l.parent_id) && on_board.contains(&l.child_id));
        for l in stranded {
            report.skip_link(&l, "an end did not come over".into());
        }
        let batch = ImportBatch {
            tasks: Vec::new(),
            links,
        };
        let outcome = ctx.store.import(&batch, ctx.now)?;
        for (l, landed) in batch.links.iter().zip(outcome.links) {
            match landed {
                LinkLanded::Added => report.links_added += 1,
                LinkLanded::Present => report.links_present += 1,
                LinkLanded::Refused(r) => report.skip_link(l, r.to_string()),
            }
        }
        progress.advance(read, "links");
        match next {
            Some(next) => after = next,
            None => return Ok(()),
        }
    }
}

impl Report {
    fn task(&mut self, incoming: &ImportedTask, landed: Landed, on_board: &mut HashSet<TaskId>) {
        let id = incoming.task.id.clone();
        let reason = match landed {
            Landed::Imported | Landed::ImportedWithoutKey => {
                if landed == Landed::ImportedWithoutKey {
                    self.keys_left_off.push(id.clone());
                }
                self.tasks_imported += 1;
                self.runs += incoming.runs.len() as u64;
                self.events += incoming.events.len() as u64;
                self.comments += incoming.comments.len() as u64;
                if let (Some(from), Some(to)) =
                    (incoming.note.get("hermes_status"), incoming.note.get("status"))
                {
                    let key = format!(
                        "{} -> {}",
                        from.as_str().unwrap_or("?"),
                        to.as_str().unwrap_or("?")
                    );
                    *self.statuses_mapped.entry(key).or_default() += 1;
                }
                on_board.insert(id);
                return;
            }
            Landed::Present => {
                self.tasks_present += 1;
                on_board.insert(id);
                return;
            }
            Landed::Collision => "another task of this board has this id (ours is kept)".to_owned(),
            Landed::Invalid(reason) => reason,
        };
        self.not_imported.push(Skipped {
            what: "task",
            id: id.to_string(),
            reason,
        });
    }

    fn skip_link(&mut self, link: &board_core::Link, reason: String) {
        self.not_imported.push(Skipped {
            what: "link",
            id: format!("{} -> {}", link.parent_id, link.child_id),
            reason,
        });
    }

    /// The report, every piece of text from the Hermes file (ids, reasons) and its path
    /// with control characters blanked: a hostile file cannot drive the terminal.
    fn print(&self) {
        println!("Imported from {} (Hermes):", plain(&self.source, false));
        println!(
            "  tasks     {} new, {} already here (of {})",
            self.tasks_imported, self.tasks_present, self.hermes.tasks
        );
        println!(
            "  history   {} runs, {} events, {} comments",
            self.runs, self.events, self.comments
        );
        println!(
            "  links     {} new, {} already here (of {})",
            self.links_added, self.links_present, self.hermes.links
        );
        for (mapping, n) in &self.statuses_mapped {
            println!("  status    {}: {n}", plain(mapping, false));
        }
        if !self.keys_left_off.is_empty() {
            println!(
                "  {} task(s) came without their idempotency key, which another task holds",
                self.keys_left_off.len()
            );
        }
        if self.not_imported.is_empty() {
            return;
        }
        println!("Not brought over ({}):", self.not_imported.len());
        for s in self.not_imported.iter().take(LISTED) {
            println!(
                "  {} {}: {}",
                s.what,
                plain(&s.id, false),
                plain(&s.reason, false)
            );
        }
        if self.not_imported.len() > LISTED {
            println!(
                "  ... and {} more (--json lists every one)",
                self.not_imported.len() - LISTED
            );
        }
    }
}

/// A progress line on stderr, rewritten in place, when stderr is a terminal and the
/// board is large; nothing otherwise.
struct Progress {
    total: u64,
    done: u64,
    shown: bool,
}

impl Progress {
    fn new(total: u64) -> Progress {
        Progress {
            total,
            done: 0,
            shown: total > LARGE && std::io::stderr().is_terminal(),
        }
    }

    fn advance(&mut self, rows: u64, what: &str) {
        self.done += rows;
        if self.shown {
            let percent = (self.done * 100).checked_div(self.total).unwrap_or(100).min(100);
            eprint!(
                "\rimporting {what}: {}/{} rows ({percent}%)\x1b[K",
                self.done, self.total
            );
            let _ = std::io::stderr().flush();
        }
    }

    fn finish(&self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}
