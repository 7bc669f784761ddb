//! Bad input: every case exits 1 (refused) or 2 (usage), prints exactly one line on
//! stderr starting `kanban: ` that gives the case's own reason, never panics, and
//! leaves the database as it was.

use crate::common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{bare, snapshot_of, unprivileged, Board};

mod habits;

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

/// One line, `kanban: ...`, that says `says` (so a refusal for another reason fails).
fn assert_one_line_failure(stderr: &[u8], what: &str, says: &str) {
    let stderr = String::from_utf8_lossy(stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{what}: stderr is not one line:\n{stderr}"
    );
    assert!(stderr.starts_with("kanban: "), "{what}: {stderr}");
    assert!(
        stderr.contains(says),
        "{what}: the message does not say {says:?}: {stderr}"
    );
}

/// Runs `args` and checks the exit code, the one-line stderr and the unchanged board.
fn check(f: &Fixture, what: &str, args: Vec<OsString>, code: i32, says: &str) {
    let before = f.board.snapshot();
    let out = f.board.kanban(&[]).args(&args).output().expect("run kanban");
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {args:?}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_one_line_failure(&out.stderr, what, says);
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

    let no_such = format!("no such task: {unknown}");
    // Each case: what, the arguments, the exit code, a fragment of its one line.
    let cases: Vec<(&str, Vec<&str>, i32, String)> = vec![
        ("show unknown id", vec!["show", unknown], 1, no_such.clone()),
        (
            "show malformed id",
            vec!["show", "t_123"],
            2,
            "not a task id: \"t_123\"".into(),
        ),
        (
            "show upper-case id",
            vec!["show", "T_DEADBEEF"],
            2,
            "not a task id: \"T_DEADBEEF\"".into(),
        ),
        (
            "show SQL as id",
            vec!["show", "t_1' OR '1'='1"],
            2,
            "not a task id: \"t_1' OR".into(),
        ),
        ("claim unknown", vec!["claim", unknown], 1, no_such.clone()),
        (
            "claim done",
            vec!["claim", done],
            1,
            format!("{done} is done; claim needs ready"),
        ),
        (
            "claim running",
            vec!["claim", running],
            1,
            format!("{running} is running; claim needs ready"),
        ),
        (
            "claim todo child",
            vec!["claim", child],
            1,
            format!("{child} is todo; claim needs ready"),
        ),
        (
            "claim ttl zero",
            vec!["claim", ready, "--ttl", "0"],
            2,
            "invalid value '0' for '--ttl <SECS>'".into(),
        ),
        (
            "claim ttl words",
            vec!["claim", ready, "--ttl", "soon"],
            2,
            "invalid value 'soon' for '--ttl <SECS>'".into(),
        ),
        ("complete unknown", vec!["complete", unknown], 1, no_such.clone()),
        (
            "complete stale run",
            vec!["complete", running, "--run", "99"],
            1,
            "run 99 is not the current run".into(),
        ),
        (
            "complete run and replay",
            vec!["complete", running, "--run", "1", "--replay-run", "1"],
            2,
            "'--run <RUN>' cannot be used with '--replay-run <RUN>'".into(),
        ),
        (
            "complete bad metadata",
            vec!["complete", ready, "--metadata", "{bad json"],
            2,
            "'{bad json' for '--metadata <JSON>': invalid JSON".into(),
        ),
        (
            "complete bad run id",
            vec!["complete", running, "--run", "one"],
            2,
            "invalid value 'one' for '--run <RUN>'".into(),
        ),
        (
            "complete without id outside a worker",
            vec!["complete"],
            2,
            "complete needs a task id".into(),
        ),
        (
            "block done",
            vec!["block", done, "why"],
            1,
            format!("{done} is done; block needs running or ready"),
        ),
        (
            "block unknown kind",
            vec!["block", ready, "--kind", "bored"],
            2,
            "invalid value 'bored' for '--kind <KIND>'".into(),
        ),
        (
            "block reason without id",
            vec!["block", "no id here"],
            2,
            "not a task id: \"no id here\"".into(),
        ),
        (
            "block stale run",
            vec!["block", running, "--run", "42"],
            1,
            "run 42 is not the current run".into(),
        ),
        (
            "unblock ready",
            vec!["unblock", ready],
            1,
            format!("{ready} is ready; unblock needs blocked"),
        ),
        (
            "reclaim ready",
            vec!["reclaim", ready],
            1,
            format!("{ready} is ready; reclaim needs running"),
        ),
        (
            "reclaim stale run",
            vec!["reclaim", running, "--run", "99"],
            1,
            "run 99 is not the current run".into(),
        ),
        (
            "heartbeat ready",
            vec!["heartbeat", ready],
            1,
            format!("{ready} is ready; heartbeat needs running"),
        ),
        (
            "heartbeat stale run",
            vec!["heartbeat", running, "--run", "99"],
            1,
            "run 99 is not the current run".into(),
        ),
        (
            "list unknown status",
            vec!["list", "--status", "later"],
            2,
            "invalid value 'later' for '--status <STATUS>'".into(),
        ),
        (
            "create without title",
            vec!["create"],
            2,
            "required arguments were not provided: <TITLE>".into(),
        ),
        (
            "create blank title",
            vec!["create", " "],
            1,
            "title cannot be blank".into(),
        ),
        (
            "create 100 KB title",
            vec!["create", &long_title],
            1,
            "a title is at most 10000 characters".into(),
        ),
        (
            "create unknown parent",
            vec!["create", "x", "--parent", unknown],
            1,
            no_such.clone(),
        ),
        (
            "create bad priority",
            vec!["create", "x", "--priority", "high"],
            2,
            "invalid value 'high' for '--priority <N>'".into(),
        ),
        (
            "create huge priority",
            vec!["create", "x", "--priority", "99999999999999999999"],
            2,
            "number too large".into(),
        ),
        (
            "create bad duration",
            vec!["create", "x", "--max-runtime", "10y"],
            2,
            "not a duration: \"10y\"".into(),
        ),
        (
            "create zero duration",
            vec!["create", "x", "--max-runtime", "0"],
            2,
            "not a duration: \"0\"".into(),
        ),
        (
            "create empty duration",
            vec!["create", "x", "--max-runtime", ""],
            2,
            "not a duration: \"\"".into(),
        ),
        (
            "create body and body file",
            vec!["create", "x", "--body", "a", "--body-file", body_file],
            2,
            "'--body <TEXT>' cannot be used with '--body-file".into(),
        ),
        (
            "create missing body file",
            vec!["create", "x", "--body-file", "/nonexistent/body"],
            2,
            "--body-file /nonexistent/body: No such file".into(),
        ),
        (
            "edit done",
            vec!["edit", done, "--title", "again"],
            1,
            format!("{done} is done; edit needs"),
        ),
        (
            "edit nothing",
            vec!["edit", ready],
            2,
            "edit needs at least one of --title, --body, --priority".into(),
        ),
        (
            "edit unknown",
            vec!["edit", unknown, "--title", "x"],
            1,
            no_such.clone(),
        ),
        (
            "assign running",
            vec!["assign", running, "coder"],
            1,
            format!("{running} is running; assign is refused"),
        ),
        (
            "link self",
            vec!["link", ready, ready],
            1,
            format!("cannot link {ready} to itself"),
        ),
        (
            "link cycle",
            vec!["link", child, parent],
            1,
            format!("linking {child} -> {parent} would make a cycle"),
        ),
        ("link unknown", vec!["link", unknown, ready], 1, no_such.clone()),
        (
            "link to running",
            vec!["link", ready, running],
            1,
            format!("{running} is running; link is refused"),
        ),
        (
            "unlink no link",
            vec!["unlink", ready, done],
            1,
            format!("{ready} -> {done} is not a link"),
        ),
        ("archive unknown", vec!["archive", unknown], 1, no_such.clone()),
        (
            "comment unknown",
            vec!["comment", unknown, "hi"],
            1,
            no_such.clone(),
        ),
        (
            "comment without id outside a worker",
            vec!["comment", "hi"],
            2,
            "comment needs a task id".into(),
        ),
        ("runs unknown", vec!["runs", unknown], 1, no_such.clone()),
        ("events unknown", vec!["events", unknown], 1, no_such.clone()),
        (
            "events --follow unknown",
            vec!["events", unknown, "--follow"],
            1,
            no_such.clone(),
        ),
        (
            "events --follow malformed id",
            vec!["events", "t_zz", "--follow", "--json"],
            2,
            "not a task id: \"t_zz\"".into(),
        ),
        ("context unknown", vec!["context", unknown], 1, no_such.clone()),
        (
            "context unknown as JSON",
            vec!["context", unknown, "--json"],
            1,
            no_such.clone(),
        ),
        (
            "context malformed id",
            vec!["context", "t_1"],
            2,
            "not a task id: \"t_1\"".into(),
        ),
        (
            "context without id outside a worker",
            vec!["context"],
            2,
            "context needs a task id".into(),
        ),
        (
            "stats with an argument",
            vec!["stats", "everything"],
            2,
            "unexpected argument 'everything'".into(),
        ),
        (
            "unknown verb",
            vec!["frobnicate"],
            2,
            "no verb \"frobnicate\" (see --help)".into(),
        ),
        (
            "a swapped pair of letters",
            vec!["lsit"],
            2,
            "no verb \"lsit\"; did you mean `list`?".into(),
        ),
        (
            "a Hermes verb kanban names otherwise",
            vec!["daemon"],
            2,
            "kanban's is `kanban gateway run`".into(),
        ),
        (
            "unknown flag",
            vec!["list", "--everything"],
            2,
            "unexpected argument '--everything'".into(),
        ),
        (
            "completions unknown shell",
            vec!["completions", "tcsh"],
            2,
            "invalid value 'tcsh' for '<SHELL>'".into(),
        ),
    ];
    assert!(cases.len() >= 25);
    for (what, args, code, says) in cases {
        check(&f, what, words(&args), code, &says);
    }

    let non_utf8 = vec![
        OsString::from("create"),
        OsString::from_vec(vec![b'x', 0xff, 0xfe]),
    ];
    check(&f, "non-UTF-8 title", non_utf8, 2, "invalid UTF-8");
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
    assert_one_line_failure(&out.stderr, "non-UTF-8 body", "--body-file -: not UTF-8 text");
}

/// The names and contents of every file under `dir`, to prove nothing was written.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
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
        assert_one_line_failure(&out.stderr, "home is a file", "the home is not a directory");
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
        assert_one_line_failure(&out.stderr, "not SQLite", "not an SQLite database");
        assert_eq!(listing(&home), before, "{args:?} wrote something");
    }
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Runs `kanban --home HOME ARGS` as a user the modes bind (see `unprivileged`).
fn kanban_unprivileged(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = unprivileged(dir);
    cmd.arg("--home").arg(home).args(args);
    cmd.output().expect("run kanban")
}

#[test]
fn a_read_only_board_is_refused() {
    let board = Board::init();
    board.create(&["x"]);
    let before = snapshot_of(&board.db());
    let files = listing(&board.home());
    set_mode(&board.db(), 0o400);
    set_mode(&board.home(), 0o500);
    let out = kanban_unprivileged(board.dir.path(), &board.home(), &["create", "y"]);
    set_mode(&board.home(), 0o700);
    set_mode(&board.db(), 0o600);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(&out.stderr, "read-only board", "readonly database");
    assert_eq!(listing(&board.home()), files, "a refused write changed a file");
    assert_eq!(snapshot_of(&board.db()), before);
}

#[test]
fn a_read_only_home_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    set_mode(&home, 0o500);
    let out = kanban_unprivileged(dir.path(), &home, &["create", "x"]);
    let read = kanban_unprivileged(dir.path(), &home, &["ls"]);
    set_mode(&home, 0o700);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(&out.stderr, "read-only home", "kanban.db: Permission denied");
    // A read finds no board there, and says so.
    assert_eq!(read.status.code(), Some(1));
    assert_one_line_failure(&read.stderr, "read-only home, read", "no board at");
    assert!(listing(&home).is_empty(), "something was written");
}

#[test]
fn a_home_that_cannot_be_created_is_refused() {
    // Under a directory that may not be written.
    let dir = tempfile::tempdir().expect("tmp");
    let parent = dir.path().join("parent");
    std::fs::create_dir(&parent).expect("mkdir");
    set_mode(&parent, 0o500);
    let out = kanban_unprivileged(dir.path(), &parent.join("new"), &["init"]);
    set_mode(&parent, 0o700);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(
        &out.stderr,
        "unwritable parent",
        "cannot create the home: Permission denied",
    );
    assert!(listing(&parent).is_empty(), "something was written");

    // Under a regular file, which no user can make a directory in.
    let file = dir.path().join("file");
    std::fs::write(&file, "a file").expect("write");
    let out = kanban_unprivileged(dir.path(), &file.join("new"), &["init"]);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_failure(&out.stderr, "home under a file", "Not a directory");
    assert_eq!(std::fs::read(&file).expect("read"), b"a file");
}
