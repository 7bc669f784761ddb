//! A Hermes user's whole day on this board, with the config and the board the real
//! hermes-agent writes (`target/venv`): the config is read as it is, the board imported,
//! the profiles that cannot run here named with their fix, a command added, the gateway's
//! pass doing the work, and the verbs of the day (`list --mine`, `show`, `log`,
//! `promote`, `reopen`, `edit --result`, `diagnostics`) each checked on the board.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use board_core::Status;
use serde_json::Value;

use crate::common::{get, venv_python, Board};

const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");

/// Runs one of the scripts that drive hermes-agent, and returns its stdout.
fn hermes(script: &str, args: &[&Path]) -> String {
    let out = std::process::Command::new(venv_python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(script))
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn wait_done(board: &Board, id: &str) {
    let start = Instant::now();
    while get(board, id).status != Status::Done {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{id} never finished: {:?}",
            get(board, id)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_hermes_users_day_on_hermes_agents_own_config_and_board() {
    let hermes_home = tempfile::tempdir().unwrap();
    hermes(
        "../board-home/tests/hermes/write_config.py",
        &[hermes_home.path()],
    );
    let hermes_db = hermes_home.path().join("kanban.db");
    let made: Value = serde_json::from_str(&hermes("tests/cli/hermes/make_board.py", &[&hermes_db])).unwrap();
    let id = |status: &str| made["ids"][status].as_str().unwrap().to_owned();

    // Morning: the Hermes config, as it is, is this home's.
    let board = Board::new();
    std::fs::create_dir_all(board.home()).unwrap();
    std::fs::copy(
        hermes_home.path().join("config.yaml"),
        board.home().join("config.yaml"),
    )
    .unwrap();
    let (code, _, err) = board.outcome(&["config", "check"], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        err.matches("Hermes settings not used by kanban (ignored)")
            .count(),
        1,
        "{err}"
    );
    assert!(
        !err.contains("worker_log_rotate_bytes") && !err.contains("max_in_progress_per_profile"),
        "{err}"
    );

    // The board comes over; the profiles it cannot run yet are named, each with its fix.
    let (code, out, err) = board.outcome(&["import-hermes", hermes_db.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Imported from"), "{out}");
    for profile in ["coder", "writer", "ops"] {
        assert!(
            err.contains(&format!("profiles.{profile}.command")),
            "{profile} not named: {err}"
        );
    }
    let assignees = board.json(&["assignees"]);
    let writer = assignees
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "writer")
        .unwrap();
    assert_eq!(writer["runnable"], false);
    let (_, out, _) = board.outcome(&["diagnostics"], &[]);
    assert!(
        out.contains("stranded_in_ready: profile writer has no command here"),
        "{out}"
    );

    // The writer gets a command; one pass of the dispatcher does the ready work.
    let worker =
        format!("[\"sh\", \"-c\", \"{KANBAN} complete --summary 'changelog updated' --result written\"]");
    board.outcome(&["config", "set", "profiles.writer.command", &worker], &[]);
    let changelog = id("ready");
    let (code, _, err) = board.outcome(&["dispatch"], &[]);
    assert_eq!(code, Some(0), "{err}");
    wait_done(&board, &changelog);
    assert_eq!(
        board.json(&["show", &changelog])["latest_summary"],
        "changelog updated"
    );
    let (code, _, _) = board.outcome(&["log", &changelog], &[]);
    assert_eq!(code, Some(0), "the worker's log is there");

    // The writer's own view, as Hermes names the caller.
    let mine = board
        .outcome(&["--json", "list", "--mine"], &[("HERMES_PROFILE", "writer")])
        .1;
    let mine: Value = serde_json::from_str(&mine).unwrap();
    assert!(
        mine.as_array().unwrap().iter().all(|t| t["assignee"] == "writer"),
        "{mine}"
    );
    assert!(
        mine.as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == changelog.as_str()),
        "{mine}"
    );

    // Blocked work says why, and is promoted by hand once the password is in; the
    // scheduled report waits for its time as in Hermes (promote refuses it), and is
    // released with unblock, then done.
    let blocked = id("blocked");
    let shown = board.json(&["show", &blocked]);
    assert_eq!(shown["block_reason"], "needs the vault password");
    let (code, out, _) = board.outcome(&["promote", &blocked, "password", "is", "in"], &[]);
    assert_eq!(
        (code, out),
        (Some(0), format!("Promoted {blocked} -> ready: password is in\n"))
    );
    let report = id("scheduled");
    assert_eq!(get(&board, &report).status, Status::Scheduled);
    let (code, _, err) = board.outcome(&["promote", &report], &[]);
    assert_eq!(code, Some(1), "{err}");
    board.ok(&["unblock", &report, "--reason", "it is 02:00"]);
    board.outcome(&["dispatch"], &[]);
    wait_done(&board, &report);

    // Afternoon: the changelog needs another pass, then its result is corrected by hand.
    assert_eq!(
        board.ok(&["reopen", &changelog, "--reason", "missed a release"]),
        format!("Reopened {changelog} -> ready\n")
    );
    board.outcome(&["dispatch"], &[]);
    wait_done(&board, &changelog);
    board.ok(&["edit", &changelog, "--result", "written, with 1.4.2"]);
    assert_eq!(
        get(&board, &changelog).result.as_deref(),
        Some("written, with 1.4.2")
    );

    // Evening: what is left is what nobody here can run, and the diagnostics say so.
    let (_, out, _) = board.outcome(&["diagnostics", "--severity", "error"], &[]);
    assert!(!out.contains("profile writer"), "{out}");
    assert!(out.contains("profile coder has no command here"), "{out}");
    let snapshot = board.snapshot();
    board_core::check_invariants(&snapshot).unwrap();
}
