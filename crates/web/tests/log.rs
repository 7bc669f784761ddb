//! `GET /api/tasks/{id}/log`: a card's worker log followed live as Server-Sent Events,
//! whole lines as JSON strings with the byte offset after them as `id:`, blanked and
//! masked as the card's page shows a log, resumable from `Last-Event-ID`.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use board_core::BoardWrites;
use common::{Served, NOW};

/// One event of the stream: its kind, its id and its data.
#[derive(Debug, PartialEq)]
struct Piece {
    kind: String,
    id: Option<u64>,
    data: String,
}

/// Reads events off a stream, each within `within`.
struct Reader {
    response: reqwest::Response,
    text: String,
}

impl Reader {
    async fn open(s: &Served, path: &str, last: Option<u64>) -> Reader {
        let mut request = s.client.get(s.url(path)).timeout(Duration::from_secs(30));
        if let Some(id) = last {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("send");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Reader {
            response,
            text: String::new(),
        }
    }

    async fn next(&mut self, within: Duration) -> Piece {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
                let Some(data) = field("data:") else { continue };
                return Piece {
                    kind: field("event:").unwrap_or("message").to_owned(),
                    id: field("id:").map(|id| id.parse().unwrap()),
                    data: serde_json::from_str(data).unwrap(),
                };
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no event within {within:?}: {:?}", self.text))
                .expect("the stream")
                .expect("the stream ended early");
            self.text.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }
}

fn append(path: &std::path::Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

const KEY: &str = "sk-livelog-4f1c9e2a7b3d6058";

async fn served_with_logs() -> (Served, tempfile::TempDir) {
    let logs = tempfile::tempdir().unwrap();
    let s = common::serve_with(web::Settings {
        log: Some(common::logs_in(logs.path())),
        secrets: vec![KEY.to_owned()],
        ..common::settings()
    })
    .await;
    (s, logs)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_is_followed_line_by_line_blanked_masked_and_resumed() {
    let (s, logs) = served_with_logs().await;
    let t = s.task("prints");
    s.store.claim(&t.id, 900, NOW).unwrap();
    let log = logs.path().join(format!("{}.log", t.id));
    let path = format!("/api/tasks/{}/log", t.id);

    let mut none = Reader::open(&s, &path, None).await;
    let first = none.next(Duration::from_secs(5)).await;
    assert_eq!((first.kind.as_str(), first.data.as_str()), ("none", "no log yet"));

    append(&log, "one\ntwo\n");
    let mut r = Reader::open(&s, &path, None).await;
    let p = r.next(Duration::from_secs(5)).await;
    assert_eq!(
        p,
        Piece {
            kind: "log".into(),
            id: Some(8),
            data: "one\ntwo\n".into()
        }
    );
    // The stream that began with no log picks the log up as it comes.
    assert_eq!(none.next(Duration::from_secs(5)).await.data, "one\ntwo\n");

    // An appended line arrives within a second.
    let wrote = Instant::now();
    append(&log, "three\n");
    let p = r.next(Duration::from_secs(1)).await;
    assert_eq!((p.id, p.data.as_str()), (Some(14), "three\n"));
    assert!(wrote.elapsed() < Duration::from_secs(1), "{:?}", wrote.elapsed());

    // A line being written is held back until it ends...
    append(&log, &format!("my key is {}", &KEY[..12]));
    let wrote = Instant::now();
    append(&log, &format!("{}\n\x1b]0;owned\x07\x1b[2Jred\r\n", &KEY[12..]));
    let p = r.next(Duration::from_secs(5)).await;
    assert!(
        wrote.elapsed() < Duration::from_millis(900),
        "the line was not held a second"
    );
    assert_eq!(
        p.data, "my key is [redacted]\n ]0;owned  [2Jred \n",
        "whole, masked, blanked"
    );
    // ...or has waited a second.
    append(&log, "a prompt> ");
    let wrote = Instant::now();
    let p = r.next(Duration::from_secs(5)).await;
    assert!(
        wrote.elapsed() >= Duration::from_millis(900),
        "{:?}",
        wrote.elapsed()
    );
    assert_eq!(p.data, "a prompt> ");
    let at = p.id.unwrap();
    assert_eq!(at, std::fs::metadata(&log).unwrap().len());

    // A reconnect names the last offset it saw and misses nothing written while away.
    drop(r);
    append(&log, "while away\n");
    let mut again = Reader::open(&s, &path, Some(at)).await;
    assert_eq!(again.next(Duration::from_secs(5)).await.data, "while away\n");
    let mut after = Reader::open(&s, &format!("{path}?after=4"), None).await;
    assert!(after
        .next(Duration::from_secs(5))
        .await
        .data
        .starts_with("two\nthree\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_log_starts_at_a_line_of_its_tail_and_catches_up_in_pieces() {
    let (s, logs) = served_with_logs().await;
    let t = s.task("prints a lot");
    let log = logs.path().join(format!("{}.log", t.id));
    let lines: String = (0..20_000).map(|i| format!("line {i:05}\n")).collect();
    append(&log, &lines);
    let path = format!("/api/tasks/{}/log", t.id);
    let mut r = Reader::open(&s, &path, None).await;
    let tail = r.next(Duration::from_secs(5)).await;
    assert!(
        tail.data.len() <= web::LOG_TAIL_BYTES as usize,
        "{}",
        tail.data.len()
    );
    assert!(
        tail.data.starts_with("line "),
        "from a line: {:?}",
        &tail.data[..20]
    );
    assert!(tail.data.ends_with("line 19999\n"));
    // From the start, the whole log in pieces of at most 64 KiB, in order.
    let mut whole = Reader::open(&s, &format!("{path}?after=0"), None).await;
    let mut got = String::new();
    while got.len() < lines.len() {
        let p = whole.next(Duration::from_secs(5)).await;
        assert!(p.data.len() <= 64 * 1024);
        got.push_str(&p.data);
    }
    assert_eq!(got, lines);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_for_a_log_are_refused() {
    let (s, _logs) = served_with_logs().await;
    let t = s.task("a card");
    for (path, status) in [
        ("/api/tasks/t_ffffffff/log".to_owned(), 404),
        ("/api/tasks/..%2f..%2fetc/log".to_owned(), 400),
        (format!("/api/tasks/{}/log?after=-1", t.id), 400),
        (format!("/api/tasks/{}/log?after=1e3", t.id), 400),
        (format!("/api/tasks/{}/log?follow=1", t.id), 400),
    ] {
        let (got, body) = s.get(&path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(!common::error(&body).contains('\n'), "one line: {body}");
    }
    // A server that reads no logs says so.
    let plain = common::serve().await;
    let t = plain.task("a card");
    let (got, body) = plain.get(&format!("/api/tasks/{}/log", t.id)).await;
    assert_eq!(
        (got, common::error(&body)),
        (404, "this server reads no worker logs")
    );
}
