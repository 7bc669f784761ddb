//! Resolving a home: `--home`, else `$KANBAN_HOME`, else `~/.kanban`, always absolute,
//! `~` expanded, an empty value an error; and creating one, with its template.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use board_home::{Config, Home, HomeError};

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
    move |name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| OsString::from(v))
    }
}

fn resolve(flag: Option<&str>, vars: &[(&str, &str)]) -> Result<PathBuf, HomeError> {
    Home::resolve_with(flag.map(PathBuf::from), &env(vars)).map(|home| home.dir().to_path_buf())
}

fn cwd() -> PathBuf {
    std::env::current_dir().expect("current dir")
}

#[test]
fn the_flag_wins_then_the_variable_then_the_users_home() {
    let all = [("KANBAN_HOME", "/from/env"), ("HOME", "/users/ann")];
    assert_eq!(
        resolve(Some("/from/flag"), &all).unwrap(),
        Path::new("/from/flag")
    );
    assert_eq!(resolve(None, &all).unwrap(), Path::new("/from/env"));
    assert_eq!(
        resolve(None, &[("HOME", "/users/ann")]).unwrap(),
        Path::new("/users/ann/.kanban")
    );
}

#[test]
fn a_relative_home_is_made_absolute_against_the_current_directory() {
    assert_eq!(resolve(Some("board"), &[]).unwrap(), cwd().join("board"));
    assert_eq!(
        resolve(None, &[("KANBAN_HOME", "./here/board")]).unwrap(),
        cwd().join("here/board")
    );
    assert!(resolve(Some("."), &[]).unwrap().is_absolute());
}

#[test]
fn a_leading_tilde_is_the_users_home() {
    let home = [("HOME", "/users/ann")];
    assert_eq!(
        resolve(Some("~/boards/a"), &home).unwrap(),
        Path::new("/users/ann/boards/a")
    );
    assert_eq!(resolve(Some("~"), &home).unwrap(), Path::new("/users/ann"));
    let via_env = [("HOME", "/users/ann"), ("KANBAN_HOME", "~/b")];
    assert_eq!(resolve(None, &via_env).unwrap(), Path::new("/users/ann/b"));
    // Only a `~` standing alone as the first component is the user's home.
    assert_eq!(resolve(Some("~bob/x"), &home).unwrap(), cwd().join("~bob/x"));
    assert_eq!(resolve(Some("/a/~/b"), &home).unwrap(), Path::new("/a/~/b"));
}

#[test]
fn empty_or_unexpandable_homes_are_one_line_errors() {
    let shown = |r: Result<PathBuf, HomeError>| r.expect_err("refused").to_string();
    let empty_var = resolve(None, &[("KANBAN_HOME", ""), ("HOME", "/users/ann")]);
    assert_eq!(
        shown(empty_var),
        "KANBAN_HOME is set but empty: name the board's home directory or unset it"
    );
    assert_eq!(
        shown(resolve(Some(""), &[("HOME", "/users/ann")])),
        "--home is empty: name the board's home directory"
    );
    assert_eq!(
        shown(resolve(Some("~/b"), &[])),
        "cannot expand ~ in ~/b: HOME is not set"
    );
    assert_eq!(
        shown(resolve(None, &[("HOME", "")])),
        "no home: pass --home DIR or set KANBAN_HOME (HOME is not set)"
    );
    for e in [
        resolve(None, &[("KANBAN_HOME", "")]),
        resolve(Some("~"), &[]),
        resolve(None, &[]),
    ] {
        assert!(e.expect_err("refused").is_usage());
    }
}

#[test]
fn paths_of_the_homes_files() {
    let home = Home::at(Path::new("/h")).unwrap();
    let names: Vec<PathBuf> = vec![
        home.database(),
        home.config(),
        home.lock_file(),
        home.pid_file(),
        home.status_file(),
        home.logs(),
        home.workspaces(),
    ];
    let expected = [
        "/h/kanban.db",
        "/h/config.yaml",
        "/h/gateway.lock",
        "/h/gateway.pid",
        "/h/gateway.json",
        "/h/logs",
        "/h/workspaces",
    ];
    assert_eq!(names, expected.map(PathBuf::from));
}

#[test]
fn opening_creates_a_private_home_and_the_template_is_written_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = Home::at(&dir.path().join("a/b")).unwrap();
    let opened = home.open().expect("open");
    assert!(opened.created_home);
    assert_eq!(opened.loaded.config, Config::default());
    let mode = std::fs::metadata(home.dir()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(home.database().exists());
    assert!(!home.config().exists(), "opening writes no config");
    drop(opened);

    assert!(home.write_template().expect("template"));
    std::fs::write(home.config(), "kanban: {max_spawn: 1}\n").expect("edit");
    assert!(
        !home.write_template().expect("kept"),
        "an existing config is kept"
    );
    let again = home.open().expect("open again");
    assert!(!again.created_home);
    assert_eq!(again.loaded.config.kanban.max_spawn, 1);
}

#[test]
fn a_home_that_is_a_file_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("f");
    std::fs::write(&file, "").expect("write");
    let e = Home::at(&file).unwrap().open().err().expect("refused");
    assert_eq!(
        e.to_string(),
        format!("{}: the home is not a directory", file.display())
    );
}

#[test]
fn a_log_tail_starts_at_a_line_keeps_to_its_attempt_and_never_follows_a_link() {
    use board_home::safety::read_tail;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("t_00000001.log");
    std::fs::write(&log, "earlier attempt\nline one\nline two\nline three\n").unwrap();
    assert_eq!(
        read_tail(&log, 0, 1024).unwrap(),
        "earlier attempt\nline one\nline two\nline three\n"
    );
    assert_eq!(
        read_tail(&log, 0, 20).unwrap(),
        "line three\n",
        "cut to its last 20 bytes, from a line start"
    );
    assert_eq!(
        read_tail(&log, 16, 1024).unwrap(),
        "line one\nline two\nline three\n",
        "nothing of an earlier attempt"
    );
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "the gateway's secret\n").unwrap();
    let linked = dir.path().join("t_00000002.log");
    std::os::unix::fs::symlink(&secret, &linked).unwrap();
    let refused = read_tail(&linked, 0, 1024);
    assert!(refused.is_err(), "a link is not followed: {refused:?}");
}

#[test]
fn a_followed_log_is_read_on_from_where_it_was_left_and_again_after_a_rotation() {
    use board_core::shapes::LogSpan;
    use board_home::safety::read_span;
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("t_00000001.log");
    std::fs::write(&log, "one\ntwo\n").unwrap();
    let first = read_span(&log, None, 1024).unwrap();
    assert_eq!(
        first,
        LogSpan {
            start: 0,
            bytes: b"one\ntwo\n".to_vec()
        }
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"three\n")
        .unwrap();
    let next = read_span(&log, Some(8), 1024).unwrap();
    assert_eq!(
        next,
        LogSpan {
            start: 8,
            bytes: b"three\n".to_vec()
        }
    );
    assert_eq!(read_span(&log, Some(14), 1024).unwrap().bytes, b"", "nothing new");
    let tail = read_span(&log, None, 4).unwrap();
    assert_eq!(
        (tail.start, tail.bytes),
        (10, b"ree\n".to_vec()),
        "the last 4 bytes"
    );
    let piece = read_span(&log, Some(0), 4).unwrap();
    assert_eq!(
        (piece.start, piece.bytes),
        (0, b"one\n".to_vec()),
        "4 bytes from 0 on"
    );
    std::fs::write(&log, "new\n").unwrap();
    let rotated = read_span(&log, Some(14), 1024).unwrap();
    assert_eq!(
        rotated,
        LogSpan {
            start: 0,
            bytes: b"new\n".to_vec()
        },
        "begun again"
    );
    let linked = dir.path().join("t_00000002.log");
    std::os::unix::fs::symlink(&log, &linked).unwrap();
    assert!(read_span(&linked, None, 1024).is_err(), "a link is not followed");
}
