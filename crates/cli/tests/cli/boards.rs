//! Boards (docs/boards.md): `boards list|create|rm|rename|switch|show`, the global
//! `--board` and `KANBAN_BOARD`, each board its own file (its own schema on PostgreSQL),
//! logs and workspaces; `rm` refuses running work unless `--force` and keeps the board;
//! one gateway serves every board, and a board whose provider is down starves no other;
//! `import-hermes` brings every Hermes board.

use std::path::Path;

use board_core::{Status, TaskId};
use serde_json::Value;

use crate::common::{snapshot_of, task_id, venv_python, Board};
use crate::gateway_board::{wait_until, worker_profile, GatewayBoard, Setup, WAIT};

fn ids(listed: &Value) -> Vec<String> {
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn boards_are_made_listed_switched_renamed_and_kept_apart() {
    let board = Board::init();
    let made = board.json(&["boards", "create", "atm10-server", "--description", "the modpack"]);
    assert_eq!(made["slug"], "atm10-server");
    assert_eq!(made["name"], "Atm10 Server", "the name comes from the slug");
    assert_eq!(made["created"], true);
    let again = board.ok(&["boards", "create", "atm10-server"]);
    assert!(
        again.starts_with("Board 'atm10-server' already exists."),
        "{again}"
    );

    let on_default = board.create(&["a default task"]);
    let on_ops = board.create(&["--board", "atm10-server", "an ops task"]);
    assert_eq!(ids(&board.json(&["list"])), [on_default.as_str()]);
    assert_eq!(
        ids(&board.json(&["--board", "atm10-server", "list"])),
        [on_ops.as_str()]
    );
    let (code, out, _) = board.outcome(&["list", "--json"], &[("KANBAN_BOARD", "atm10-server")]);
    assert_eq!(code, Some(0));
    assert_eq!(ids(&serde_json::from_str(&out).unwrap()), [on_ops.as_str()]);
    let (code, _, err) = board.outcome(&["show", &on_ops], &[]);
    assert_eq!(code, Some(1), "a task of another board is not on this one: {err}");
    let file = board.home().join("boards/atm10-server/kanban.db");
    assert_eq!(
        snapshot_of(&file).tasks.len(),
        1,
        "the board's own file holds its task"
    );
    assert_eq!(board.snapshot().tasks.len(), 1);

    let listed = board.json(&["boards", "list"]);
    let slugs: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["default", "atm10-server"]);
    assert_eq!(listed[0]["current"], true);
    assert_eq!(listed[1]["counts"]["ready"], 1);
    assert_eq!(listed[1]["description"], "the modpack");

    let said = board.ok(&["boards", "switch", "atm10-server"]);
    assert_eq!(said, "Active board is now 'atm10-server'.\n");
    assert_eq!(
        ids(&board.json(&["list"])),
        [on_ops.as_str()],
        "the current board is the default now"
    );
    assert_eq!(
        ids(&board.json(&["--board", "default", "list"])),
        [on_default.as_str()]
    );
    let (_, out, _) = board.outcome(&["list", "--json"], &[("KANBAN_BOARD", "default")]);
    assert_eq!(
        ids(&serde_json::from_str(&out).unwrap()),
        [on_default],
        "KANBAN_BOARD wins over the current board"
    );
    let shown = board.json(&["boards", "show"]);
    assert_eq!(
        (shown["slug"].as_str(), shown["total"].as_u64()),
        (Some("atm10-server"), Some(1))
    );

    let renamed = board.ok(&["boards", "rename", "atm10-server", "ATM10 server"]);
    assert_eq!(renamed, "Board 'atm10-server' renamed to 'ATM10 server'.\n");
    let human = board.ok(&["boards", "list"]);
    let line = human.lines().find(|l| l.contains("atm10-server")).unwrap();
    assert!(
        line.starts_with('●') && line.contains("ATM10 server") && line.contains("ready=1"),
        "{human}"
    );
    board.ok(&["boards", "switch", "default"]);
    assert!(
        !board.home().join("current_board").exists(),
        "the default board needs no file"
    );
}

#[test]
fn a_board_with_running_work_is_removed_only_with_force_and_is_kept() {
    let board = Board::init();
    board.ok(&["boards", "create", "old", "--switch"]);
    let task = board.create(&["still running"]);
    let done = board.create(&["finished"]);
    board.ok(&["claim", &task]);
    board.ok(&["claim", &done]);
    board.ok(&["complete", &done, "--result", "ok"]);

    let (code, _, err) = board.outcome(&["boards", "rm", "old"], &[]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("board old has 1 running task(s) (") && err.contains(&task),
        "{err}"
    );
    assert!(
        board.home().join("boards/old/kanban.db").exists(),
        "nothing was removed"
    );

    let removed = board.json(&["boards", "rm", "old", "--force"]);
    assert_eq!(removed["reclaimed"], serde_json::json!([task]));
    let kept = Path::new(removed["kept"].as_str().unwrap()).to_path_buf();
    assert!(
        kept.starts_with(board.home().join("boards/_archived")),
        "{kept:?}"
    );
    let archived = snapshot_of(&kept.join("kanban.db"));
    let reclaimed = archived.tasks.iter().find(|t| t.id.as_str() == task).unwrap();
    assert_eq!(
        reclaimed.status,
        Status::Ready,
        "the running task was reclaimed before"
    );
    assert_eq!(archived.tasks.len(), 2, "the board is kept whole");
    assert!(!board.home().join("boards/old").exists());
    assert!(
        !board.home().join("current_board").exists(),
        "the current board is the default again"
    );
    let listed = board.json(&["boards", "list"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let (code, _, err) = board.outcome(&["--board", "old", "list"], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no board old"), "{err}");
    // The slug is free again: a new board of that name starts empty.
    board.ok(&["boards", "create", "old"]);
    assert_eq!(board.json(&["--board", "old", "list"]), serde_json::json!([]));
}

#[test]
fn bad_board_names_and_requests_are_refused_in_one_line_writing_nothing() {
    let board = Board::init();
    board.ok(&["boards", "create", "ops"]);
    let files = |b: &Board| {
        let mut found: Vec<String> = walk(&b.home());
        found.sort();
        found
    };
    let before = files(&board);
    for (args, env, code, said) in [
        (
            &["--board", "../x", "list"][..],
            None,
            2,
            "invalid board \"../x\"",
        ),
        (
            &["--board", "nope", "list"],
            None,
            1,
            "no board nope (from --board)",
        ),
        (&["list"], Some("Bad/Slug"), 2, "KANBAN_BOARD: invalid board"),
        (&["list"], Some("gone"), 1, "no board gone (from KANBAN_BOARD)"),
        (&["boards", "create", "Has Space"], None, 2, "invalid board"),
        (&["boards", "create", "_hidden"], None, 2, "invalid board"),
        (&["boards", "create", &"a".repeat(65)], None, 2, "invalid board"),
        (
            &["boards", "create", "x", "--name", "two\nlines"],
            None,
            2,
            "--name must be one line",
        ),
        (
            &["boards", "rm", "default"],
            None,
            1,
            "the default board cannot be removed",
        ),
        (&["boards", "rm", "nope"], None, 1, "no board nope"),
        (&["boards", "switch", "nope"], None, 1, "no board nope"),
        (&["boards", "rename", "ops", "\u{1b}[2J"], None, 2, "one line"),
        (&["boards", "rename", "ops", "  "], None, 2, "cannot be blank"),
        (&["boards", "frobnicate"], None, 2, "no verb \"frobnicate\""),
    ] {
        let env: Vec<(&str, &str)> = env.map(|v| ("KANBAN_BOARD", v)).into_iter().collect();
        let (got, out, err) = board.outcome(args, &env);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    assert_eq!(files(&board), before, "nothing was written");
    std::fs::write(board.home().join("current_board"), "../../etc\n").unwrap();
    let (code, _, err) = board.outcome(&["list"], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("current_board: invalid board"), "{err}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        found.push(path.display().to_string());
        if path.is_dir() {
            found.extend(walk(&path));
        }
    }
    found
}

/// Appends `text` to the home's config.
fn append_config(home: &Path, text: &str) {
    let path = home.join("config.yaml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push_str(text);
    std::fs::write(path, config).unwrap();
}

fn status_on(board: &GatewayBoard, slug: &str, id: &TaskId) -> String {
    let out = board.kanban(&["--board", slug, "show", id.as_str(), "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    doc["task"]["status"].as_str().unwrap_or_default().to_owned()
}

fn create_on(board: &GatewayBoard, slug: &str, args: &[&str]) -> TaskId {
    let mut all = vec!["--board", slug, "create"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = board.kanban_ok(&all);
    let doc: Value = serde_json::from_str(&out).unwrap();
    task_id(doc["id"].as_str().unwrap())
}

#[test]
fn one_gateway_serves_every_board_and_a_board_whose_provider_is_down_starves_no_other() {
    let profiles = worker_profile(
        "coder",
        "echo $KANBAN_BOARD > board.txt; kanban complete --result ok",
    );
    let mut board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 2,
        ..Setup::default()
    });
    // `down`'s provider refuses every connection; `paused` runs no worker at all.
    append_config(
        &board.path(),
        "boards:\n  down:\n    decomposer:\n      base_url: http://127.0.0.1:9/v1\n      timeout: 2\n  paused:\n    max_spawn: 0\n",
    );
    for slug in ["down", "paused", "locked"] {
        board.kanban_ok(&["boards", "create", slug]);
    }
    let locked_work = create_on(&board, "locked", &["work on locked", "--assignee", "coder"]);
    // `locked`'s file is held by another writer: its ticks wait on the lock, and no
    // other board's may wait with them.
    let mut holder = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\nprint('held', flush=True)\nsys.stdin.read()",
        ])
        .arg(board.path().join("boards/locked/kanban.db"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut held = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut held,
    )
    .unwrap();
    assert_eq!(held.trim(), "held");
    board.reply(
        "idea on default",
        fake_llm::Reply::text(r#"{"fanout": false, "rationale": "one", "title": "the idea, tightened", "body": "do it", "assignee": "coder"}"#),
    );
    let stuck = create_on(&board, "down", &["idea on down", "--triage"]);
    let down_work = create_on(&board, "down", &["work on down", "--assignee", "coder"]);
    let held = create_on(&board, "paused", &["work on paused", "--assignee", "coder"]);
    board.start_gateway();
    // `locked`'s loop is stuck on the lock while `down`'s ticks on; only then does the
    // default board get its work, which must flow all the same.
    let ticks = |slug: &str| {
        let status = std::fs::read_to_string(board.path().join("boards").join(slug).join("gateway.json"));
        let status: Value = status
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default();
        status["ticks"].as_u64()
    };
    // Well within one wait on `locked`'s lock (30 s), which a shared loop would make
    // every board's tick wait out.
    let quick = std::time::Duration::from_secs(20);
    wait_until("the down board ticked on", quick, || {
        ticks("down").unwrap_or(0) > 5
    });
    assert!(
        ticks("locked") < Some(2),
        "the lock holds its board's ticks: {:?}",
        ticks("locked")
    );
    let idea = create_on(&board, "default", &["idea on default", "--triage"]);

    wait_until("the default board's idea is done", quick, || {
        status_on(&board, "default", &idea) == "done"
    });
    wait_until("the down board's ready work is done", WAIT, || {
        status_on(&board, "down", &down_work) == "done"
    });
    let refused = |slug: &str| {
        let out = board.kanban(&["--board", slug, "stats", "--json"]);
        let stats: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        stats["llm"]["all_time"]["by_outcome"]["connection_error"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_until("the down board's provider was tried", WAIT, || {
        refused("down") > 0
    });
    assert_eq!(status_on(&board, "down", &stuck), "triage");
    assert_eq!(refused("default"), 0, "each board's model calls are its own");
    assert_eq!(
        status_on(&board, "paused", &held),
        "ready",
        "max_spawn 0 on that board"
    );
    assert_eq!(
        status_on(&board, "locked", &locked_work),
        "ready",
        "its board is held"
    );
    drop(holder.stdin.take());
    holder.wait().unwrap();
    wait_until("the locked board's work is done once it is let go", WAIT, || {
        status_on(&board, "locked", &locked_work) == "done"
    });
    let workspace = board
        .path()
        .join("boards/down/workspaces")
        .join(down_work.as_str());
    let told = std::fs::read_to_string(workspace.join("board.txt")).unwrap();
    assert_eq!(told.trim(), "down", "a worker is told its board");
    assert!(
        board.path().join("boards/down/gateway.json").exists(),
        "each board has its status"
    );

    // A board made while the gateway runs is served without a restart.
    board.kanban_ok(&["boards", "create", "late"]);
    let late = create_on(&board, "late", &["work on late", "--assignee", "coder"]);
    wait_until("the late board's work is done", WAIT, || {
        status_on(&board, "late", &late) == "done"
    });
    board.kill_gateway();
    for slug in ["default", "down", "paused", "locked", "late"] {
        let file = match slug {
            "default" => board.db_path(),
            _ => board.path().join("boards").join(slug).join("kanban.db"),
        };
        crate::gateway_board::check_board(&snapshot_of(&file)).unwrap();
    }
}

#[test]
fn import_hermes_brings_every_hermes_board_into_the_board_of_its_slug() {
    let hermes = tempfile::tempdir().unwrap();
    let code = r#"
import contextlib, os, sys
root = sys.argv[1]
os.environ["HERMES_HOME"] = root
os.environ["HERMES_KANBAN_HOME"] = root
from hermes_cli import kanban_db as kb
kb.create_board("research", name="Research")
for board, title in [(None, "on the default board"), ("research", "on the research board")]:
    with contextlib.closing(kb.connect(board=board)) as conn:
        kb.create_task(conn, title=title, assignee="writer")
"#;
    let out = std::process::Command::new(venv_python())
        .args(["-c", code])
        .arg(hermes.path())
        .output()
        .expect("run python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let board = Board::init();
    let root = hermes.path().to_str().unwrap();
    let report = board.json(&["import-hermes", root]);
    let boards: Vec<&str> = report["boards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["board"].as_str().unwrap())
        .collect();
    assert_eq!(boards, ["default", "research"], "{report}");
    let titles = |args: &[&str]| -> Vec<String> {
        let listed = board.json(args);
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(titles(&["list"]), ["on the default board"]);
    assert_eq!(
        titles(&["--board", "research", "list"]),
        ["on the research board"]
    );
    let again = board.json(&["import-hermes", root]);
    assert_eq!(
        again["boards"][1]["tasks_present"], 1,
        "importing again changes nothing"
    );
    let (code, single, _) = board.outcome(
        &["import-hermes", hermes.path().join("kanban.db").to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(0));
    assert!(
        single.contains("1 more board(s) beside it (research)"),
        "{single}"
    );
}

#[test]
fn boards_on_postgresql_are_schemas_of_their_own() {
    use crate::scratch_schema::{drop_schema, in_schema, server_url, unique_schema};
    let default_schema = unique_schema("boards_default");
    let slug = unique_schema("pgb").replace('_', "-");
    let board = Board::init();
    let url = in_schema(&server_url(), &default_schema);
    let coder = worker_profile("coder", "kanban complete --result ok");
    let config = format!(
        "database_url: {url}\nkanban:\n  dispatch_interval_seconds: 0.2\n  auto_decompose: false\nprofiles:\n{coder}"
    );
    std::fs::write(board.home().join("config.yaml"), config).unwrap();
    let mut admin = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    let schemas = |admin: &mut postgres::Client, like: &str| -> Vec<String> {
        admin
            .query(
                "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE $1 ORDER BY 1",
                &[&like],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    admin
        .batch_execute(&format!("CREATE SCHEMA {default_schema}"))
        .unwrap();
    let ours = format!("kanban_{slug}");
    let made = board.json(&["boards", "create", &slug]);
    let store = made["store"].as_str().unwrap();
    assert!(store.contains(&format!("(schema {ours})")), "{made}");
    assert_eq!(schemas(&mut admin, &ours), [ours.as_str()]);
    let on_board = board.create(&["--board", &slug, "in its own schema"]);
    let on_default = board.create(&["on the default board"]);
    let titles = |schema: &str| -> Vec<String> {
        let mut admin = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
        admin
            .query(&format!("SELECT title FROM \"{schema}\".tasks"), &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    assert_eq!(titles(&ours), ["in its own schema"]);
    assert_eq!(titles(&default_schema), ["on the default board"]);
    assert_eq!(ids(&board.json(&["--board", &slug, "list"])), [on_board]);
    assert_eq!(ids(&board.json(&["list"])), [on_default]);

    // One gateway runs the work of both boards, each in its own schema.
    let work = [
        board.create(&["--board", &slug, "work here", "--assignee", "coder"]),
        board.create(&["work there", "--assignee", "coder"]),
    ];
    let mut gateway = crate::common::kanban_command()
        .arg("--home")
        .arg(board.home())
        .args(["gateway", "run"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = |on: &str, id: &str| -> String {
        let (_, out, _) = board.outcome(&["--board", on, "show", id, "--json"], &[]);
        let doc: Value = serde_json::from_str(&out).unwrap_or_default();
        doc["task"]["status"].as_str().unwrap_or_default().to_owned()
    };
    wait_until("both boards' work done", WAIT, || {
        status(&slug, &work[0]) == "done" && status("default", &work[1]) == "done"
    });
    let _ = gateway.kill();
    let _ = gateway.wait();
    let removed = board.json(&["boards", "rm", &slug]);
    let kept = removed["schema"].as_str().unwrap().to_owned();
    assert!(
        kept.starts_with("kanban_rm") && kept.ends_with(&slug),
        "{removed}"
    );
    assert_eq!(
        schemas(&mut admin, &ours),
        Vec::<String>::new(),
        "the board's schema is renamed"
    );
    assert_eq!(
        titles(&kept),
        ["in its own schema", "work here"],
        "and kept whole"
    );
    for schema in [default_schema, kept] {
        drop_schema(&format!("\"{schema}\""));
    }
}
