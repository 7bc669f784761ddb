//! Reliability: database faults. A file that is not SQLite, one of another
//! application, one with a newer schema, a read-only home or database, a full disk:
//! every verb says so in one line and overwrites nothing; a gateway whose disk fills
//! while it runs stays up, does not bill a card every tick, and carries on once space
//! is freed.
//!
//! The full-disk tests mount a tmpfs, which needs root: CI runs as root, and elsewhere
//! they fail saying so rather than pass without running.

use crate::common;
use crate::gateway_board;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use board_core::{Status, TaskId};
use common::{is_root, unprivileged};
use fake_llm::Reply;
use gateway_board::{check_board, wait_until, GatewayBoard, Setup, KANBAN};

fn require_root(why: &str) {
    assert!(
        is_root(),
        "this test needs root to {why} (CI runs as root); run it as root or --skip it"
    );
}

/// `kanban --home HOME ARGS`, killed if it runs longer than 20 s (a gateway that
/// should have refused to start).
fn run(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(KANBAN);
    cmd.env_remove("KANBAN_HOME")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID");
    run_as(cmd, home, args)
}

/// `run` for a command line that ends in the binary (`cmd`), such as `unprivileged`'s.
fn run_as(mut cmd: Command, home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = cmd
        .arg("--home")
        .arg(home)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("kanban {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One line on stderr, `kanban: ...`, no panic, no backtrace.
fn assert_one_line(what: &str, stderr: &str, mentions: &str) {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: not one line:\n{stderr}");
    assert!(lines[0].starts_with("kanban: "), "{what}: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(
        lines[0].to_lowercase().contains(mentions),
        "{what}: does not say {mentions:?}: {stderr}"
    );
}

fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// Every verb that opens the board refuses `home` with one line naming the problem and
/// leaves every file of the home byte for byte as it was; with `no_new_files`, it also
/// adds none (no `-wal` / `-shm` beside the refused file).
fn refused_untouched(home: &Path, mentions: &str, no_new_files: bool) {
    let before = listing(home);
    let db_bytes = std::fs::read(home.join("kanban.db")).unwrap();
    for args in [
        vec!["list"],
        vec!["create", "must not land"],
        vec!["init"],
        vec!["stats"],
        vec!["gateway", "run"],
    ] {
        let (code, _, stderr) = run(home, &args);
        assert_eq!(code, Some(1), "kanban {args:?}: {stderr}");
        assert_one_line(&format!("kanban {args:?}"), &stderr, mentions);
        eprintln!("kanban {args:?}: {}", stderr.trim());
        assert!(
            std::fs::read(home.join("kanban.db")).unwrap() == db_bytes,
            "kanban {args:?} wrote to the refused file"
        );
        let after = listing(home);
        for (name, bytes) in &before {
            let now = after.iter().find(|f| &f.0 == name);
            assert!(
                now.is_some_and(|f| &f.1 == bytes),
                "kanban {args:?} changed {name}"
            );
        }
        if no_new_files {
            let names = |l: &[(String, Vec<u8>)]| l.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
            assert_eq!(
                names(&after),
                names(&before),
                "kanban {args:?} added files to the home"
            );
        }
    }
}

fn initialised_home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    let (code, _, stderr) = run(&home, &["init"]);
    assert_eq!(code, Some(0), "{stderr}");
    fold_wal(&home);
    home
}

/// The board keeps its WAL between commands; fold it into the file so a test can patch
/// the header and see every byte in one file. A plain connection checkpoints when it
/// closes and removes the WAL.
fn fold_wal(home: &Path) {
    let conn = rusqlite::Connection::open(home.join("kanban.db")).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    assert!(!home.join("kanban.db-wal").exists(), "the WAL is folded in");
}

/// Overwrites four big-endian bytes of the database header (60: user_version,
/// 68: application_id).
fn patch_header(db: &Path, offset: usize, value: u32) {
    let mut bytes = std::fs::read(db).unwrap();
    bytes[offset..offset + 4].copy_from_slice(&value.to_be_bytes());
    std::fs::write(db, bytes).unwrap();
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("kanban.db"), b"my shopping list\neggs\n".repeat(300)).unwrap();
    refused_untouched(&home, "not an sqlite database", true);
}

#[test]
fn another_applications_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let home = initialised_home(dir.path());
    std::fs::remove_file(home.join("config.yaml")).unwrap();
    patch_header(&home.join("kanban.db"), 68, 0x4d50_4c53);
    refused_untouched(&home, "another application", false);
}

#[test]
fn another_applications_rollback_journal_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // SQLite's default rollback journal, as another program would leave it.
    let other = rusqlite::Connection::open(home.join("kanban.db")).unwrap();
    let mode: String = other.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete");
    other
        .execute_batch("create table notes(body text); insert into notes values ('mine');")
        .unwrap();
    drop(other);
    assert_eq!(
        listing(&home).len(),
        1,
        "a rollback-journal database leaves no file beside it"
    );
    refused_untouched(&home, "another application", true);
}

#[test]
fn refusing_a_wal_mode_file_adds_no_files_to_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = initialised_home(dir.path());
    patch_header(&home.join("kanban.db"), 60, 99);
    refused_untouched(&home, "newer", true);
    let home = initialised_home(&dir.path().join("other"));
    patch_header(&home.join("kanban.db"), 68, 0x4d50_4c53);
    refused_untouched(&home, "another application", true);
}

#[test]
fn a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let home = initialised_home(dir.path());
    patch_header(&home.join("kanban.db"), 60, 99);
    refused_untouched(&home, "newer", false);
}

#[test]
fn a_read_only_board_refuses_writes_in_one_line_and_changes_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let dir = tempfile::tempdir().unwrap();
    let home = initialised_home(dir.path());
    let (code, _, stderr) = run(&home, &["create", "before"]);
    assert_eq!(code, Some(0), "{stderr}");
    // Without a WAL every byte of the board is in one file, which must stay as it was.
    fold_wal(&home);
    mode(&home.join("kanban.db"), 0o400);
    mode(&home, 0o500);
    let before = listing(&home);
    // Run as a user the modes bind (root, whom they do not stop, runs it as nobody).
    let kanban = |args: &[&str]| run_as(unprivileged(dir.path()), &home, args);
    // A WAL board needs a `-shm` beside it to open at all, so `init` fails too.
    for args in [
        vec!["create", "must not land"],
        vec!["init"],
        vec!["gateway", "run"],
    ] {
        let (code, _, stderr) = kanban(&args);
        assert_eq!(code, Some(1), "kanban {args:?} on a read-only board: {stderr}");
        assert_one_line(
            &format!("kanban {args:?}"),
            &stderr,
            "kanban.db: attempt to write a readonly database",
        );
        assert!(listing(&home) == before, "kanban {args:?} changed the home");
    }
    mode(&home, 0o700);
}

fn filler(path: &Path) -> u64 {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5a_u8; 16 * 1024];
    let mut written = 0;
    while f.write_all(&chunk).is_ok() {
        written += chunk.len() as u64;
    }
    // Fill the last partial chunk too, byte by byte where it fits.
    while f.write_all(&[0x5a]).is_ok() && f.flush().is_ok() {
        written += 1;
    }
    let _ = f.sync_all();
    written
}

#[test]
fn a_full_disk_fails_a_cli_write_in_one_line_and_loses_nothing() {
    require_root("mount a small tmpfs as the home");
    let b = GatewayBoard::new(Setup {
        tmpfs_home_kib: Some(2048),
        ..Setup::default()
    });
    let kept = b.create(&["kept"]);
    let before = b.snapshot();
    let fill = b.path().join("filler");
    let bytes = filler(&fill);
    eprintln!("filled the tmpfs home with {bytes} bytes");
    let body_file = b.dir.path().join("body.txt");
    std::fs::write(&body_file, "x".repeat(256 * 1024)).unwrap();
    let body_file = body_file.to_str().unwrap();
    let out = b.kanban(&["create", "does not fit", "--body-file", body_file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("full disk: exit {:?}: {}", out.status.code(), stderr.trim());
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_one_line("create on a full disk", &stderr, "database or disk is full");
    std::fs::remove_file(&fill).unwrap();
    assert_eq!(b.snapshot(), before, "a failed write changed the board");
    let fits = b.create(&["fits now", "--body-file", body_file]);
    let snapshot = b.snapshot();
    check_board(&snapshot).unwrap();
    assert!(snapshot.tasks.iter().any(|t| t.id == kept));
    assert!(snapshot.tasks.iter().any(|t| t.id == fits));
    assert_eq!(snapshot.tasks.len(), 2);
}

/// The same without a mount, for any user: a file size limit (`ulimit -f`) stops the
/// write as a full disk would.
#[test]
fn a_file_size_limit_fails_a_cli_write_in_one_line_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = initialised_home(dir.path());
    let (code, _, stderr) = run(&home, &["create", "kept"]);
    assert_eq!(code, Some(0), "{stderr}");
    let before = common::snapshot_of(&home.join("kanban.db"));
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "x".repeat(512 * 1024)).unwrap();
    let body = body.to_str().unwrap();
    let mut limited = Command::new("sh");
    limited.args(["-c", "trap '' XFSZ; ulimit -f 64; exec \"$@\"", "sh", KANBAN]);
    let (code, _, stderr) = run_as(limited, &home, &["create", "big", "--body-file", body]);
    eprintln!("ulimit -f: exit {code:?}: {}", stderr.trim());
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(
        "create past the file size limit",
        &stderr,
        "kanban.db: disk i/o error",
    );
    let after = common::snapshot_of(&home.join("kanban.db"));
    assert_eq!(after, before, "a failed write changed the board");
    let (code, _, stderr) = run(&home, &["create", "big", "--body-file", body]);
    assert_eq!(code, Some(0), "without the limit the same write lands: {stderr}");
    let after = common::snapshot_of(&home.join("kanban.db"));
    check_board(&after).unwrap();
    let titles: Vec<&str> = after.tasks.iter().map(|t| t.title.as_str()).collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(titles.contains(&"kept") && titles.contains(&"big"), "{titles:?}");
}

/// A 12-child fan-out of ~36 KiB: more than a full disk has room for.
fn big_fanout() -> String {
    let children: Vec<String> = (0..12)
        .map(|i| {
            format!(
                r#"{{"title": "part {i}", "body": "{}", "parents": []}}"#,
                "y".repeat(3000)
            )
        })
        .collect();
    format!(r#"{{"fanout": true, "tasks": [{}]}}"#, children.join(","))
}

/// A gateway on a 4 MiB tmpfs home with `kanban_extra` settings, a card whose model
/// reply (`big_fanout`, sent after `delay`) is requested, then the disk filled while
/// the model thinks. Returns the board, the card, the filler file and its size.
fn full_disk_during_a_call(
    title: &str,
    delay: Duration,
    kanban_extra: &str,
) -> (GatewayBoard, TaskId, PathBuf, u64) {
    require_root("mount a small tmpfs as the home");
    let mut b = GatewayBoard::new(Setup {
        tmpfs_home_kib: Some(4096),
        kanban_extra,
        ..Setup::default()
    });
    b.reply(title, Reply::delayed(delay, Reply::text(big_fanout())));
    b.start_gateway();
    let card = b.create(&[title, "--triage"]);
    b.wait_for("the request", || b.bills(&card) == 1);
    let fill = b.path().join("filler");
    let bytes = filler(&fill);
    (b, card, fill, bytes)
}

/// The gateway's log from byte `from` on.
fn log_since(b: &GatewayBoard, from: usize) -> String {
    let log = b.gateway_log();
    log[from.min(log.len())..].to_owned()
}

/// The line a gateway logs when a decomposition of `card` could not commit because the
/// disk was full: the proof that a test reached the full-disk path.
fn failed_on_a_full_disk(log: &str, card: &TaskId) -> bool {
    let failed = format!("automatic decomposition failed task={card} ");
    log.lines()
        .any(|l| l.contains(&failed) && l.contains("database or disk is full"))
}

#[test]
fn a_gateway_whose_disk_fills_stays_up_and_carries_on() {
    let (mut b, card, fill, bytes) =
        full_disk_during_a_call("lands on a full disk", Duration::from_millis(1500), "");
    let log_from = b.gateway_log().len();
    // The reply lands while the disk is full: wait for the gateway to say what became
    // of it (the only witness while nothing can be written).
    wait_until(
        "the decomposition to fail on the full disk",
        Duration::from_secs(20),
        || failed_on_a_full_disk(&log_since(&b, log_from), &card),
    );
    assert!(
        b.gateway_alive(),
        "the gateway died on a full disk:\n{}",
        b.gateway_log()
    );
    let during = b.snapshot();
    check_board(&during).unwrap();
    std::fs::remove_file(&fill).unwrap();
    eprintln!("filled {bytes} bytes; freed");
    b.prove_ticks(3);
    assert!(b.gateway_alive(), "the gateway died:\n{}", b.gateway_log());
    let after = b.snapshot();
    check_board(&after).unwrap();
    let task = b.task(&card);
    let children = after.links.iter().filter(|l| l.child_id == card).count();
    eprintln!(
        "card is {} with {children} children after {} requests; log:\n{}",
        task.status,
        b.bills(&card),
        b.gateway_log()
    );
    assert!(
        (task.status == Status::Triage && children == 0) || children == 12,
        "a half-written decomposition: {children} children"
    );
    assert!(!b.gateway_log().contains("panicked"));
}

#[test]
fn a_full_disk_does_not_make_the_gateway_rebill_a_card_every_tick() {
    const TITLE: &str = "billed on a full disk";
    // Retries a second apart, 3 attempts in all (docs/decomposer.md#failure-policy): a gateway that billed the
    // card every tick would pass 3 within a few ticks.
    let (b, card, fill, _) = full_disk_during_a_call(
        TITLE,
        Duration::from_millis(1500),
        "  decompose_retry_base_seconds: 1\n  decompose_failure_limit: 3\n",
    );
    let log_from = b.gateway_log().len();
    // Retries answer at once, so each attempt the gateway makes reaches the commit.
    b.reply(TITLE, Reply::text(big_fanout()));
    // A tick on the full disk cannot rewrite gateway.json and says so: the tick count.
    let ticks = || {
        log_since(&b, log_from)
            .matches("could not write gateway.json error=No space left on device")
            .count()
    };
    b.wait_for("three attempts, or 60 ticks on the full disk", || {
        b.bills(&card) >= 3 || ticks() >= 60
    });
    let (bills, at) = (b.bills(&card), ticks());
    // Each attempt leases the card first (docs/gateway.md#several-gateways-on-one-board):
    // once the full disk refuses the lease too, nothing more is sent. Either way, never
    // more than the policy's 3.
    assert!(
        (1..=3).contains(&bills),
        "{bills} requests after {at} ticks: the policy allows 3"
    );
    b.wait_for("15 more ticks on the full disk", || ticks() >= at + 15);
    let log = log_since(&b, log_from);
    assert!(
        failed_on_a_full_disk(&log, &card),
        "no attempt reached the full disk:\n{log}"
    );
    let bills = b.bills(&card);
    eprintln!(
        "{bills} requests for one card over {} ticks on a full disk",
        ticks()
    );
    assert!(
        bills <= 3,
        "billed {bills} times: again after the last attempt the policy allows"
    );
    std::fs::remove_file(&fill).unwrap();
    check_board(&b.snapshot()).unwrap();
    assert_eq!(b.task(&card).status, Status::Triage);
}
