//! Bad input: every case exits 1 (refused) or 2 (usage), prints exactly one line on
//! stderr starting `kanban: `, never panics, and leaves the database as it was.

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;

use common::{bare, snapshot_of, Board};

/// A board with one task in each interesting state.
struct Fixture {
    board: Board,
    ready: String,
    done: String,
    running: String,
    parent: String,
    child: String,
}

fn fixture() -> Fixture {
    let board = Board::init();
    let ready = board.create(&["ready one"]);
    let done = board.create(&["done one"]);
    board.ok(&["complete", &done]);
    let running = board.create(&["running one"]);
    board.ok(&["claim", &running]);
    let parent = board.create(&["parent"]);
    let child = board.create(&["child", "--parent", &parent]);
    Fixture {
        board,
        ready,
        done,
        running,
        parent,
        child,
    }
}

fn assert_one_line_failure(stderr: &[u8], what: &str) {
    let stderr = String::from_utf8_lossy(stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{what}: stderr is not one line:\n{stderr}"
    );
    assert!(stderr.starts_with("kanban: "), "{what}: {stderr}");
}

/// Runs `args` and checks the exit code, the one-line stderr and the unchanged board.
fn check(f: &Fixture, what: &str, args: Vec<OsString>, stdin: Option<&str>, code: i32) {
    let before = f.board.snapshot();
    let mut cmd = f.board.kanban(&[]);
    cmd.args(&args);
    if let Some(input) = stdin {
        cmd.write_stdin(input.to_owned());
    }
    let out = cmd.output().expect("run kanban");
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {args:?}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_one_line_failure(&out.stderr, what);
    assert_eq!(f.board.snapshot(), before, "{what}: the board changed");
}

fn words(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn bad_input_matrix() {
    let f = fixture();
    let (ready, done, running, parent, child) = (&f.ready, &f.done, &f.running, &f.parent, &f.child);
    let unknown = "t_deadbeef";
    let long_title = "x".repeat(100_000);
    let body_file = f.board.dir.path().join("body.txt");
    std::fs::write(&body_file, "b").expect("write");
    let body_file = body_file.to_str().expect("utf-8");

    let cases: Vec<(&str, Vec<&str>, i32)> = vec![
        ("show unknown id", vec!["show", unknown], 1),
        ("show malformed id", vec!["show", "t_123"], 2),
        ("show upper-case id", vec!["show", "T_DEADBEEF"], 2),
        ("show SQL as id", vec!["show", "t_1' OR '1'='1"], 2),
        ("claim unknown", vec!["claim", unknown], 1),
        ("claim done", vec!["claim", done], 1),
        ("claim running", vec!["claim", running], 1),
        ("claim todo child", vec!["claim", child], 1),
        ("claim ttl zero", vec!["claim", ready, "--ttl", "0"], 2),
        ("claim ttl words", vec!["claim", ready, "--ttl", "soon"], 2),
        ("complete unknown", vec!["complete", unknown], 1),
        ("complete stale run", vec!["complete", running, "--run", "99"], 1),
        (
            "complete run and replay",
            vec!["complete", running, "--run", "1", "--replay-run", "1"],
            2,
        ),
        (
            "complete bad metadata",
            vec!["complete", ready, "--metadata", "{bad json"],
            2,
        ),
        (
            "complete bad run id",
            vec!["complete", running, "--run", "one"],
            2,
        ),
        ("complete without id outside a worker", vec!["complete"], 2),
        ("block done", vec!["block", done, "why"], 1),
        ("block unknown kind", vec!["block", ready, "--kind", "bored"], 2),
        ("block reason without id", vec!["block", "no id here"], 2),
        ("block stale run", vec!["block", running, "--run", "42"], 1),
        ("unblock ready", vec!["unblock", ready], 1),
        ("reclaim ready", vec!["reclaim", ready], 1),
        ("reclaim stale run", vec!["reclaim", running, "--run", "99"], 1),
        ("heartbeat ready", vec!["heartbeat", ready], 1),
        (
            "heartbeat stale run",
            vec!["heartbeat", running, "--run", "99"],
            1,
        ),
        ("list unknown status", vec!["list", "--status", "later"], 2),
        ("create without title", vec!["create"], 2),
        ("create blank title", vec!["create", "   "], 1),
        ("create 100 KB title", vec!["create", &long_title], 1),
        (
            "create unknown parent",
            vec!["create", "x", "--parent", unknown],
            1,
        ),
        (
            "create bad priority",
            vec!["create", "x", "--priority", "high"],
            2,
        ),
        (
            "create huge priority",
            vec!["create", "x", "--priority", "99999999999999999999"],
            2,
        ),
        (
            "create bad duration",
            vec!["create", "x", "--max-runtime", "10y"],
            2,
        ),
        (
            "create zero duration",
            vec!["create", "x", "--max-runtime", "0"],
            2,
        ),
        (
            "create empty duration",
            vec!["create", "x", "--max-runtime", ""],
            2,
        ),
        (
            "create body and body file",
            vec!["create", "x", "--body", "a", "--body-file", body_file],
            2,
        ),
        (
            "create missing body file",
            vec!["create", "x", "--body-file", "/nonexistent/body"],
            2,
        ),
        ("edit done", vec!["edit", done, "--title", "again"], 1),
        ("edit nothing", vec!["edit", ready], 2),
        ("edit unknown", vec!["edit", unknown, "--title", "x"], 1),
        ("assign running", vec!["assign", running, "coder"], 1),
        ("link self", vec!["link", ready, ready], 1),
        ("link cycle", vec!["link", child, parent], 1),
        ("link unknown", vec!["link", unknown, ready], 1),
        ("link to running", vec!["link", ready, running], 1),
        ("unlink no link", vec!["unlink", ready, done], 1),
        ("archive unknown", vec!["archive", unknown], 1),
        ("comment unknown", vec!["comment", unknown, "hi"], 1),
        ("comment without id outside a worker", vec!["comment", "hi"], 2),
        ("runs unknown", vec!["runs", unknown], 1),
        ("events unknown", vec!["events", unknown], 1),
        ("events --follow unknown", vec!["events", unknown, "--follow"], 1),
        (
            "events --follow malformed id",
            vec!["events", "t_zz", "--follow", "--json"],
            2,
        ),
        ("context unknown", vec!["context", unknown], 1),
        ("context unknown as JSON", vec!["context", unknown, "--json"], 1),
        ("context malformed id", vec!["context", "t_1"], 2),
        ("context without id outside a worker", vec!["context"], 2),
        ("stats with an argument", vec!["stats", "everything"], 2),
        ("unknown verb", vec!["frobnicate"], 2),
        ("unknown flag", vec!["list", "--everything"], 2),
        ("completions unknown shell", vec!["completions", "tcsh"], 2),
    ];
    assert!(cases.len() >= 25);
    for (what, args, code) in cases {
        check(&f, what, words(&args), None, code);
    }

    let non_utf8 = vec![
        OsString::from("create"),
        OsString::from_vec(vec![b'x', 0xff, 0xfe]),
    ];
    check(&f, "non-UTF-8 title", non_utf8, None, 2);
    let non_utf8_body = vec![
        OsString::from("create"),
        OsString::from("x"),
        OsString::from("--body-file"),
        OsString::from("-"),
    ];
    let out = f
        .board
        .kanban(&[])
        .args(&non_utf8_body)
        .write_stdin(vec![0xffu8, 0xfe])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_failure(&out.stderr, "non-UTF-8 body");
}

/// The names and contents of every file under `dir`, to prove nothing was written.
fn listing(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_home_that_is_a_file_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::write(&home, "not a directory").expect("write");
    for args in [
        &["create", "x"][..],
        &["stats"],
        &["stats", "--json"],
        &["context", "t_deadbeef"],
        &["events", "--follow"],
    ] {
        let out = bare().arg("--home").arg(&home).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_one_line_failure(&out.stderr, "home is a file");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(std::fs::read(&home).expect("read"), b"not a directory");
    }
}

#[test]
fn a_database_that_is_not_sqlite_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    std::fs::write(
        home.join("kanban.db"),
        "this is my shopping list, not a board\n".repeat(10),
    )
    .expect("write");
    let before = listing(&home);
    for args in [&["create", "x"][..], &["ls"], &["init"]] {
        let out = bare().arg("--home").arg(&home).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_one_line_failure(&out.stderr, "not SQLite");
        assert_eq!(listing(&home), before, "{args:?} wrote something");
    }
}

#[test]
fn a_read_only_home_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("skipped: root ignores permissions");
        return;
    }
    let mode = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };

    // An existing board that may not be written.
    let board = Board::init();
    board.create(&["x"]);
    let before = snapshot_of(&board.db());
    mode(&board.db(), 0o400);
    mode(&board.home(), 0o500);
    let out = board.kanban(&["create", "y"]).output().expect("run");
    mode(&board.home(), 0o700);
    mode(&board.db(), 0o600);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(&out.stderr, "read-only board");
    assert_eq!(snapshot_of(&board.db()), before);

    // An empty home that may not be written: no board can be made in it.
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    mode(&home, 0o500);
    let out = bare().arg("--home").arg(&home).arg("ls").output().expect("run");
    mode(&home, 0o700);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(&out.stderr, "read-only home");
    assert!(listing(&home).is_empty(), "something was written");

    // A home that cannot be created.
    mode(dir.path(), 0o500);
    let out = bare()
        .arg("--home")
        .arg(dir.path().join("new"))
        .arg("ls")
        .output()
        .expect("run");
    mode(dir.path(), 0o700);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(&out.stderr, "unwritable parent");
}
