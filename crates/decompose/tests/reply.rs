//! The reply parser at its boundary: a table of replies a model might send, each with
//! the plan or the reason it produces, kept as one reviewed snapshot.

use board_core::plan::{validate_fanout, CHILD_TITLE_MAX_CHARS};
use board_core::Plan;
use decompose::{parse_reply, Profile, Rejection, Roster};
use serde_json::{json, Value};

fn roster() -> Roster {
    Roster::new(vec![
        Profile::new("default", "General-purpose worker"),
        Profile::new("coder", "Writes and tests Rust code"),
        Profile::new("reviewer", "Reviews pull requests"),
    ])
}

fn titled(n: usize) -> Value {
    let tasks: Vec<Value> = (0..n).map(|i| json!({ "title": format!("part {i}") })).collect();
    json!({ "fanout": true, "tasks": tasks })
}

fn fanout_with(task: Value) -> String {
    json!({ "fanout": true, "tasks": [{ "title": "first" }, task] }).to_string()
}

/// The replies of the table, as (case, reply).
fn cases() -> Vec<(&'static str, String)> {
    let valid = r#"{"fanout": true, "rationale": "two steps", "tasks": [{"title": "schema", "body": "add the table", "assignee": "coder"}, {"title": "review", "assignee": "reviewer", "parents": [0]}]}"#;
    vec![
        ("empty reply", String::new()),
        ("prose with no JSON", "Sure! I think this should be split into three tasks.".into()),
        ("braces in the wrong order", "} nothing here {".into()),
        ("JSON array", r#"[{"fanout": false, "title": "x"}]"#.into()),
        ("JSON string holding an object", r#""{\"fanout\": false, \"title\": \"x\"}""#.into()),
        ("bare number", "42".into()),
        ("truncated JSON", r#"{"fanout": true, "tasks": [{"title": "a"}, {"title": "#.into()),
        ("two objects", r#"{"fanout": false, "title": "a"} {"fanout": false, "title": "b"}"#.into()),
        ("missing fanout", r#"{"title": "x"}"#.into()),
        ("fanout \"yes\"", r#"{"fanout": "yes", "title": "x"}"#.into()),
        ("fanout 1", r#"{"fanout": 1, "title": "x"}"#.into()),
        ("fanout null", r#"{"fanout": null, "title": "x"}"#.into()),
        ("rationale not a string", r#"{"fanout": false, "rationale": ["a"], "title": "x"}"#.into()),
        ("single with blank title and body", r#"{"fanout": false, "title": "  ", "body": "\n"}"#.into()),
        ("single with nothing", r#"{"fanout": false}"#.into()),
        ("single with non-string title", r#"{"fanout": false, "title": 7}"#.into()),
        ("single with non-string body", r#"{"fanout": false, "title": "x", "body": {"a": 1}}"#.into()),
        ("tasks missing", r#"{"fanout": true}"#.into()),
        ("tasks not an array", r#"{"fanout": true, "tasks": {"title": "x"}}"#.into()),
        ("empty tasks", r#"{"fanout": true, "tasks": []}"#.into()),
        ("500 tasks", titled(500).to_string()),
        ("17 tasks", titled(17).to_string()),
        ("task not an object", r#"{"fanout": true, "tasks": [{"title": "a"}, "b"]}"#.into()),
        ("task title missing", fanout_with(json!({ "body": "b" }))),
        ("blank title", fanout_with(json!({ "title": " \t " }))),
        ("non-string title", fanout_with(json!({ "title": ["x"] }))),
        ("non-string body", fanout_with(json!({ "title": "x", "body": 3 }))),
        ("parents not an array", fanout_with(json!({ "title": "x", "parents": 0 }))),
        ("string parent", fanout_with(json!({ "title": "x", "parents": ["0"] }))),
        ("float parent", fanout_with(json!({ "title": "x", "parents": [1.0] }))),
        ("negative parent", fanout_with(json!({ "title": "x", "parents": [-1] }))),
        ("huge negative parent", r#"{"fanout": true, "tasks": [{"title": "x", "parents": [-1e300]}]}"#.into()),
        ("huge parent", r#"{"fanout": true, "tasks": [{"title": "x", "parents": [123456789012345678901234567890]}]}"#.into()),
        ("null parent", fanout_with(json!({ "title": "x", "parents": [null] }))),
        (
            "out-of-range parent",
            r#"{"fanout": true, "tasks": [{"title": "a"}, {"title": "b"}, {"title": "c"}, {"title": "d", "parents": [9]}]}"#.into(),
        ),
        ("self-parent", fanout_with(json!({ "title": "x", "parents": [1] }))),
        ("duplicate parent", fanout_with(json!({ "title": "x", "parents": [0, 0] }))),
        (
            "cycle",
            r#"{"fanout": true, "tasks": [{"title": "a", "parents": [2]}, {"title": "b", "parents": [0]}, {"title": "c", "parents": [1]}]}"#.into(),
        ),
        ("code-fenced valid reply", format!("```json\n{valid}\n```")),
        ("prose around valid JSON", format!("Here is the plan:\n{valid}\nLet me know if it helps.")),
        (
            "unknown assignee",
            r#"{"fanout": true, "tasks": [{"title": "a", "assignee": "wizard"}, {"title": "b", "assignee": 3}, {"title": "c", "assignee": null}, {"title": "d"}]}"#.into(),
        ),
        (
            "single with unknown assignee",
            r#"{"fanout": false, "title": " Tightened title ", "body": "Do X.", "assignee": "nobody"}"#.into(),
        ),
        ("single with body only", r#"{"fanout": false, "body": "Only a body.", "assignee": "coder"}"#.into()),
        ("extra fields ignored", r#"{"fanout": false, "title": "x", "confidence": 0.9, "tasks": 3}"#.into()),
        ("long title cut", fanout_with(json!({ "title": "ab".repeat(150) }))),
        ("16 tasks", titled(16).to_string()),
    ]
}

fn outcome(reply: &str) -> String {
    match parse_reply(reply, &roster()) {
        Err(rejection) => format!("rejected: {rejection}"),
        Ok(Plan::Single {
            title,
            body,
            assignee,
        }) => {
            format!("single: title {title:?}, body {body:?}, assignee {assignee:?}")
        }
        Ok(Plan::Fanout { rationale, tasks }) => {
            let mut text = format!("fanout of {}, rationale {rationale:?}", tasks.len());
            for (i, t) in tasks.iter().take(4).enumerate() {
                let title: String = t.title.chars().take(30).collect();
                text.push_str(&format!(
                    "\n          [{i}] {title:?} ({} chars), body {:?}, assignee {}, parents {:?}",
                    t.title.chars().count(),
                    t.body,
                    t.assignee,
                    t.parents
                ));
            }
            text
        }
    }
}

#[test]
fn every_reply_in_the_table_is_accepted_or_rejected_with_a_named_reason() {
    let cases = cases();
    assert!(cases.len() >= 25);
    let mut table = String::new();
    for (case, reply) in &cases {
        let shown: String = reply.chars().take(100).collect::<String>().replace('\n', "\\n");
        let more = if reply.chars().count() > 100 { "..." } else { "" };
        table.push_str(&format!(
            "{case}\n  reply:  {shown}{more}\n  result: {}\n\n",
            outcome(reply)
        ));
    }
    insta::assert_snapshot!("reply_table", table);
}

#[test]
fn malformed_replies_say_so_first() {
    for reply in ["", "no json", "[1, 2]", "{\"fanout\": ", "\"{}\""] {
        let err = parse_reply(reply, &roster()).unwrap_err();
        assert!(matches!(err, Rejection::Malformed(_)), "{reply}: {err}");
        assert!(err.to_string().starts_with("malformed reply"), "{err}");
    }
}

#[test]
fn the_limit_follows_the_roster_and_matches_validate_fanout() {
    let small = roster().with_max_children(Some(3));
    let err = parse_reply(&titled(4).to_string(), &small).unwrap_err();
    assert_eq!(err.to_string(), "reply has 4 tasks, limit is 3");
    assert!(parse_reply(&titled(3).to_string(), &small).is_ok());

    let big = roster().with_max_children(Some(1000));
    assert!(parse_reply(&titled(64).to_string(), &big).is_ok());
    let err = parse_reply(&titled(65).to_string(), &big).unwrap_err();
    assert_eq!(err.to_string(), "reply has 65 tasks, limit is 64");

    let Ok(Plan::Fanout { tasks, .. }) = parse_reply(&titled(64).to_string(), &big) else {
        panic!("64 tasks under a cap of 64 were refused");
    };
    let mut too_many = tasks.clone();
    too_many.push(tasks[0].clone());
    assert_eq!(
        validate_fanout(&too_many, 1000).unwrap_err().to_string(),
        "reply has 65 tasks, limit is 64"
    );
}

#[test]
fn assignees_resolve_against_the_roster_and_the_default() {
    let roster = roster().with_default_assignee(Some("reviewer"));
    let reply = r#"{"fanout": true, "tasks": [{"title": "a", "assignee": " coder "}, {"title": "b", "assignee": "Coder"}, {"title": "c", "assignee": false}]}"#;
    let Ok(Plan::Fanout { tasks, .. }) = parse_reply(reply, &roster) else {
        panic!("rejected");
    };
    let assignees: Vec<&str> = tasks.iter().map(|t| t.assignee.as_str()).collect();
    assert_eq!(assignees, ["coder", "reviewer", "reviewer"]);

    let empty = Roster::default().with_default_assignee(Some("ops"));
    let Ok(Plan::Single { assignee, .. }) =
        parse_reply(r#"{"fanout": false, "title": "x", "assignee": "coder"}"#, &empty)
    else {
        panic!("rejected");
    };
    assert_eq!(assignee.as_deref(), Some("ops"));
}

#[test]
fn child_titles_are_cut_to_200_characters_without_splitting_characters() {
    let reply = fanout_with(json!({ "title": "é".repeat(500), "body": "b".repeat(10_000) }));
    let Ok(Plan::Fanout { tasks, .. }) = parse_reply(&reply, &roster()) else {
        panic!("rejected");
    };
    assert_eq!(tasks[1].title, "é".repeat(CHILD_TITLE_MAX_CHARS));
    assert_eq!(tasks[1].body.len(), 10_000, "bodies are never cut");
}

#[test]
fn a_single_title_longer_than_the_board_allows_is_rejected_not_cut() {
    let reply = json!({ "fanout": false, "title": "x".repeat(10_001) }).to_string();
    let err = parse_reply(&reply, &roster()).unwrap_err();
    assert_eq!(err.to_string(), "title is longer than 10000 characters");
}

#[test]
fn a_code_fence_inside_a_body_survives() {
    let reply =
        "```json\n{\"fanout\": false, \"title\": \"x\", \"body\": \"```rust\\nfn main() {}\\n```\"}\n```";
    let Ok(Plan::Single { body, .. }) = parse_reply(reply, &roster()) else {
        panic!("rejected");
    };
    assert_eq!(body, "```rust\nfn main() {}\n```");
}

#[test]
fn hostile_inputs_are_rejected_without_panicking_or_echoing() {
    let deep_array = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    let deep_parents = format!(
        "{{\"fanout\": true, \"tasks\": [{{\"title\": \"x\", \"parents\": {}0{}}}]}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let secret = "SECRET".repeat(10_000);
    let long_prose = format!("{{\"fanout\": \"{secret}\"}}");
    let long_garbage = format!("{{ {secret} }}");
    let huge_exponent = r#"{"fanout": true, "tasks": [{"title": "x", "parents": [1e999]}]}"#.to_owned();
    let many_parents = json!({ "fanout": true, "tasks": [
        { "title": "a" },
        { "title": "b", "parents": vec![0; 100_000] },
    ]})
    .to_string();
    let nul = "{\"fanout\": false, \"title\": \"a\u{0}b\"}".to_owned();
    for reply in [
        deep_array,
        deep_object,
        deep_parents,
        long_prose,
        long_garbage,
        huge_exponent,
        many_parents,
        nul,
    ] {
        match parse_reply(&reply, &roster()) {
            Ok(plan) => assert!(matches!(plan, Plan::Single { .. })),
            Err(err) => {
                let text = err.to_string();
                assert!(text.chars().count() <= 220, "{text}");
                assert!(!text.contains("SECRET"), "{text}");
                assert!(!text.contains('\n'), "{text}");
            }
        }
    }
}
