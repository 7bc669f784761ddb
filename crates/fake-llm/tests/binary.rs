//! The `fake-llm serve` binary and its script file format.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{chat, client, post, reply_content};
use fake_llm::{Reply, Script, Usage};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-llm");

fn script_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), text).expect("write script");
    file
}

#[tokio::test]
async fn serve_prints_its_base_url_and_answers_from_the_script() {
    let script = script_file(
        &json!({
            "default": {"kind": "text", "content": "fallback"},
            "replies": [
                {"kind": "text", "content_json": {"fanout": false, "title": "first"}},
                {"kind": "error", "status": 503, "message": "busy", "retry_after": 2}
            ],
            "tasks": {"t_0123abcd": [{"kind": "text", "content": "for the task"}]}
        })
        .to_string(),
    );
    let mut child = tokio::process::Command::new(BINARY)
        .args(["serve", "--port", "0", "--script"])
        .arg(script.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn fake-llm");
    let stdout = child.stdout.take().expect("stdout");
    let mut first_line = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        BufReader::new(stdout).read_line(&mut first_line),
    )
    .await
    .expect("the URL is printed promptly")
    .expect("read stdout");
    let url = first_line.trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"),
        "{url:?}"
    );

    assert_eq!(
        reply_content(&url, &chat("x")).await,
        r#"{"fanout":false,"title":"first"}"#
    );
    let busy = post(&url, &chat("x")).await;
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.headers()["retry-after"], "2");
    assert_eq!(
        reply_content(&url, &chat("Task id: t_0123abcd")).await,
        "for the task"
    );
    assert_eq!(reply_content(&url, &chat("x")).await, "fallback");

    let log: Value = client()
        .get(url.replace("/v1", "/_fake/requests"))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(log.as_array().map(Vec::len), Some(4));
    assert_eq!(log[2]["task_id"], "t_0123abcd");

    child.kill().await.expect("kill");
}

#[test]
fn a_missing_script_exits_2_with_one_line() {
    let output = Command::new(BINARY)
        .args(["serve", "--script", "/nonexistent/script.json"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/script.json"), "{stderr}");
}

#[test]
fn an_invalid_script_exits_2_with_one_line_naming_the_problem() {
    for (text, expected) in [
        ("{\"replies\": [", "line 1"),
        (
            r#"{"replies": [{"kind": "txt", "content": "x"}]}"#,
            "unknown variant `txt`",
        ),
        (
            r#"{"default": {"kind": "error", "status": 200, "message": "x"}}"#,
            "default: error status 200",
        ),
        (r#"{"tasks": {"T1": [{"kind": "hang"}]}}"#, "not a task id"),
        (r#"{"replys": []}"#, "unknown field `replys`"),
    ] {
        let script = script_file(text);
        let output = Command::new(BINARY)
            .args(["serve", "--script"])
            .arg(script.path())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{text}: {stderr}");
        assert!(stderr.contains(expected), "{text}: {stderr}");
        assert!(stderr.contains("bad script file"), "{stderr}");
    }
}

#[test]
fn the_script_format_covers_every_reply_kind() {
    let script = Script::from_json(
        &json!({
            "replies": [
                {"kind": "text", "content": "hi", "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
                {"kind": "raw", "body": "not json"},
                {"kind": "raw", "status": 502, "content_type": "text/html", "body": "<h1>bad gateway</h1>"},
                {"kind": "hang"},
                {"kind": "delay", "ms": 250, "then": {"kind": "error", "status": 500, "message": "late"}},
                {"kind": "stall", "content": "abc", "after_chunks": 1},
                {"kind": "drop", "content": "abc", "after_chunks": 2}
            ]
        })
        .to_string(),
    )
    .expect("valid script");
    assert_eq!(
        script.replies,
        vec![
            Reply::Text {
                content: "hi".into(),
                usage: Some(Usage {
                    prompt_tokens: 3,
                    completion_tokens: 4
                }),
            },
            Reply::raw("application/json", "not json"),
            Reply::Raw {
                status: 502,
                content_type: "text/html".into(),
                body: "<h1>bad gateway</h1>".into(),
            },
            Reply::Hang,
            Reply::delayed(Duration::from_millis(250), Reply::error(500, "late")),
            Reply::Stall {
                content: "abc".into(),
                after_chunks: 1
            },
            Reply::Drop {
                content: "abc".into(),
                after_chunks: 2
            },
        ]
    );
    assert_eq!(script.default, Script::default().default);
    assert!(script.tasks.is_empty());
}

#[test]
fn a_text_reply_needs_exactly_one_content() {
    for text in [
        r#"{"default": {"kind": "text"}}"#,
        r#"{"default": {"kind": "text", "content": "a", "content_json": {}}}"#,
    ] {
        let err = Script::from_json(text).expect_err(text);
        assert!(err.contains("exactly one of content and content_json"), "{err}");
    }
    let err = Script::from_json(r#"{"tasks": {"t_0a": []}}"#).expect_err("empty task");
    assert!(err.contains("tasks.t_0a: needs at least one reply"), "{err}");
}
