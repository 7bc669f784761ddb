//! Reliability (issue 7): database faults. A file that is not SQLite, one of another
//! application, one with a newer schema, a read-only home or database, a full disk:
//! every verb says so in one line and overwrites nothing; a gateway whose disk fills
//! while it runs stays up and carries on once space is freed.

mod gateway_board;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use board_core::{Status, Store, TaskId};
use fake_llm::Reply;
use gateway_board::{check_board, wait_until, Board, Setup, KANBAN};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// `kanban --home HOME ARGS`, killed if it runs longer than 20 s (a gateway that
/// should have refused to start).
fn run(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(KANBAN)
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("KANBAN_HOME")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
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
    // The board keeps its WAL between commands; fold it into the file so the tests
    // below can patch the header and see every byte in one file.
    // A plain connection checkpoints when it closes and removes the WAL.
    let conn = rusqlite::Connection::open(home.join("kanban.db")).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    assert!(!home.join("kanban.db-wal").exists(), "the WAL is folded in");
    home
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
    let made = Command::new("sqlite3")
        .arg(home.join("kanban.db"))
        .arg("create table notes(body text); insert into notes values ('mine');")
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no sqlite3 binary to make another application's database");
        return;
    }
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

/// Unmounts on drop, lazily, so a failing test leaves no mount behind.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn sh(script: &str) -> bool {
    Command::new("sh")
        .args(["-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_read_only_board_refuses_writes_in_one_line_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = initialised_home(dir.path());
    let (code, _, stderr) = run(&home, &["create", "before"]);
    assert_eq!(code, Some(0), "{stderr}");
    let _mount;
    if is_root() {
        // Root ignores permission bits: make the whole home a read-only bind mount.
        let h = home.display();
        if !sh(&format!(
            "mount --bind '{h}' '{h}' && mount -o remount,ro,bind '{h}'"
        )) {
            eprintln!("skipped: running as root and a read-only bind mount is not possible here");
            return;
        }
        _mount = Mount(home.clone());
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(home.join("kanban.db"), std::fs::Permissions::from_mode(0o400)).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o500)).unwrap();
    }
    let before = listing(&home);
    for args in [
        vec!["create", "must not land"],
        vec!["init"],
        vec!["gateway", "run"],
    ] {
        let (code, _, stderr) = run(&home, &args);
        eprintln!("read-only: kanban {args:?}: exit {code:?}: {}", stderr.trim());
        assert!(!stderr.contains("panicked"), "{stderr}");
        if args[0] == "create" || args[0] == "gateway" {
            assert_eq!(code, Some(1), "kanban {args:?} on a read-only board: {stderr}");
            // The message names the file it cannot write (the board, or the gateway's
            // lock beside it); whether it says why ("read-only") is reported, not required.
            let file = if args[0] == "create" {
                "kanban.db"
            } else {
                "gateway.lock"
            };
            assert_one_line(&format!("kanban {args:?}"), &stderr, file);
        }
        assert!(listing(&home) == before, "kanban {args:?} changed the home");
    }
    if !is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
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
    if !is_root() {
        // Without a tmpfs, a file size limit stands in for the full disk.
        let dir = tempfile::tempdir().unwrap();
        let home = initialised_home(dir.path());
        let body = "x".repeat(512 * 1024);
        let out = Command::new("sh")
            .args(["-c", "trap '' XFSZ; ulimit -f 8; exec \"$@\"", "sh", KANBAN])
            .arg("--home")
            .arg(&home)
            .args(["create", "big", "--body", &body])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("ulimit -f: exit {:?}: {}", out.status.code(), stderr.trim());
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_one_line("create on a size-limited file", &stderr, "");
        return;
    }
    let b = Board::new(Setup {
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
    assert_one_line("create on a full disk", &stderr, "");
    std::fs::remove_file(&fill).unwrap();
    assert_eq!(b.snapshot(), before, "a failed write changed the board");
    let fits = b.create(&["fits now", "--body-file", body_file]);
    let snapshot = b.snapshot();
    check_board(&snapshot).unwrap();
    assert!(snapshot.tasks.iter().any(|t| t.id == kept));
    assert!(snapshot.tasks.iter().any(|t| t.id == fits));
    assert_eq!(snapshot.tasks.len(), 2);
}

/// A gateway on a 4 MiB tmpfs home, a card whose model reply (a 12-child fan-out of
/// ~36 KiB, sent after `delay`) is requested, then the disk filled while the model
/// thinks. Returns the board, the card, the filler file and its size; `None` when not
/// root (mounting needs it).
fn full_disk_during_a_call(title: &str, delay: Duration) -> Option<(Board, TaskId, PathBuf, u64)> {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return None;
    }
    let mut b = Board::new(Setup {
        tmpfs_home_kib: Some(4096),
        ..Setup::default()
    });
    let children: Vec<String> = (0..12)
        .map(|i| {
            format!(
                r#"{{"title": "part {i}", "body": "{}", "parents": []}}"#,
                "y".repeat(3000)
            )
        })
        .collect();
    let fanout = format!(r#"{{"fanout": true, "tasks": [{}]}}"#, children.join(","));
    b.reply(title, Reply::delayed(delay, Reply::text(fanout)));
    b.start_gateway();
    let card = b.create(&[title, "--triage"]);
    b.wait_for("the request", || b.bills(&card) == 1);
    let fill = b.path().join("filler");
    let bytes = filler(&fill);
    Some((b, card, fill, bytes))
}

#[test]
fn a_gateway_whose_disk_fills_stays_up_and_carries_on() {
    let Some((mut b, card, fill, bytes)) =
        full_disk_during_a_call("lands on a full disk", Duration::from_millis(1500))
    else {
        return;
    };
    let log_before = b.gateway_log().len();
    // The reply lands while the disk is full: wait for the gateway to say what became
    // of it (the only witness while nothing can be written).
    wait_until(
        "the decomposition to end on a full disk",
        Duration::from_secs(20),
        || {
            let log = b.gateway_log();
            log[log_before.min(log.len())..].contains(card.as_str())
        },
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
    let Some((b, card, fill, _)) =
        full_disk_during_a_call("billed on a full disk", Duration::from_millis(300))
    else {
        return;
    };
    // The failure policy allows 3 attempts in all (SPEC 5.5, 10); give the gateway
    // 15 ticks' worth of time to exceed that while the disk stays full.
    let start = Instant::now();
    while b.bills(&card) <= 3 && start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let bills = b.bills(&card);
    std::fs::remove_file(&fill).unwrap();
    let billed_rows = b.db().llm_calls(Some(&card)).map(|c| c.len()).unwrap_or(0);
    eprintln!(
        "{bills} requests for one card in {:?} on a full disk ({billed_rows} billed rows)",
        start.elapsed()
    );
    assert!(
        bills <= 3,
        "{bills} requests for one card while the disk was full"
    );
}
