//! Bad input to the verbs and flags a Hermes user reaches for (`reassign`, `list --mine`,
//! unquoted words, `config get/set`, `dispatch --max`, `archive --rm`), and blank profile names, which
//! every verb refuses alike.

use super::{check, fixture, words};

#[test]
fn bad_input_to_the_hermes_habits() {
    let f = fixture();
    let (ready, running) = (&f.ready, &f.running);
    let unknown = "t_deadbeef";
    let no_such = format!("no such task: {unknown}");
    let blank = "a profile name cannot be empty (use `none` for nobody)".to_owned();
    let cases: Vec<(&str, Vec<&str>, i32, String)> = vec![
        (
            "create blank assignee",
            vec!["create", "x", "--assignee", ""],
            2,
            blank.clone(),
        ),
        (
            "assign blank profile",
            vec!["assign", ready, ""],
            2,
            blank.clone(),
        ),
        (
            "assign spaces as profile",
            vec!["assign", ready, "  "],
            2,
            blank.clone(),
        ),
        (
            "reassign blank profile",
            vec!["reassign", ready, ""],
            2,
            blank.clone(),
        ),
        (
            "reassign running without --reclaim",
            vec!["reassign", running, "coder"],
            1,
            format!("task {running} is running; assign is refused"),
        ),
        (
            "reassign unknown",
            vec!["reassign", unknown, "coder", "--reclaim"],
            1,
            no_such.clone(),
        ),
        (
            "reassign reason without --reclaim",
            vec!["reassign", ready, "coder", "--reason", "why"],
            2,
            "the following required arguments were not provided: --reclaim".into(),
        ),
        (
            "list --mine and --assignee",
            vec!["list", "--mine", "--assignee", "coder"],
            2,
            "'--mine' cannot be used with '--assignee <PROFILE|none>'".into(),
        ),
        (
            "comment unknown, unquoted",
            vec!["comment", unknown, "the", "tests", "pass"],
            1,
            no_such.clone(),
        ),
        (
            "comment unquoted words without id",
            vec!["comment", "the", "tests", "pass"],
            2,
            "not a task id: \"the\"".into(),
        ),
        (
            "block unknown, unquoted",
            vec!["block", unknown, "waiting", "for", "keys"],
            1,
            no_such.clone(),
        ),
        (
            "block unquoted words without id",
            vec!["block", "waiting", "for", "keys"],
            2,
            "not a task id: \"waiting\"".into(),
        ),
        (
            "list unknown sort",
            vec!["list", "--sort", "age"],
            2,
            "invalid value 'age' for '--sort <FIELD>'".into(),
        ),
        (
            "list sorted after unknown",
            vec!["list", "--sort", "title", "--after", unknown],
            1,
            no_such.clone(),
        ),
        (
            "dispatch --max zero",
            vec!["dispatch", "--max", "0"],
            2,
            "invalid value '0' for '--max <N>'".into(),
        ),
        (
            "config get unknown key",
            vec!["config", "get", "kanban.nope"],
            1,
            "config.yaml: unknown key kanban.nope".into(),
        ),
        (
            "config set unknown key",
            vec!["config", "set", "kanban.max_spwan", "3"],
            1,
            "config.yaml: unknown key kanban.max_spwan".into(),
        ),
        (
            "config set bad value",
            vec!["config", "set", "kanban.max_spawn", "lots"],
            1,
            "config.yaml: kanban.max_spawn:".into(),
        ),
        (
            "config set below a value",
            vec!["config", "set", "kanban.max_spawn.more", "1"],
            1,
            "kanban.max_spawn: is a value, not a section of keys".into(),
        ),
        (
            "decompose unknown",
            vec!["decompose", unknown],
            1,
            no_such.clone(),
        ),
        (
            "archive --rm unknown",
            vec!["archive", "--rm", unknown],
            1,
            no_such.clone(),
        ),
        (
            "archive --rm of a live task",
            vec!["archive", "--rm", ready],
            1,
            format!("task {ready} is not archived; only an archived task can be deleted (archive it first)"),
        ),
        (
            "archive --rm beside ids to archive",
            vec!["archive", ready, "--rm", running],
            2,
            "cannot be used with".into(),
        ),
        (
            "archive --rm without an id",
            vec!["archive", "--rm"],
            2,
            "a value is required for '--rm <ID>...'".into(),
        ),
    ];
    let config = f.board.home().join("config.yaml");
    let config_before = std::fs::read(&config).expect("config");
    for (what, args, code, says) in cases {
        check(&f, what, words(&args), code, &says);
        assert_eq!(
            std::fs::read(&config).expect("config"),
            config_before,
            "{what}: config changed"
        );
    }
}

#[test]
fn a_refusal_names_the_task_once() {
    let f = fixture();
    for args in [
        &["decompose", "t_deadbeef"][..],
        &["show", "t_deadbeef"],
        &["assign", "t_deadbeef", "x"],
    ] {
        let out = f.board.kanban(args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.matches("t_deadbeef").count(), 1, "{args:?}: {stderr}");
    }
    let done = &f.done;
    let out = f.board.kanban(&["decompose", done]).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches(done.as_str()).count(), 1, "{stderr}");
}
