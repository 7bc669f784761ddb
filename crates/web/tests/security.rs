//! Who may use the server: a token when bound beyond loopback, a loopback `Host` without
//! one, same-origin writes; and no secret from the environment in any response.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use board_core::memory::MemStore;
use board_core::{BoardReads, BoardWrites};
use common::{error, serve, serve_at, settings, Served, NOW, TOKEN};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_non_loopback_bind_needs_a_token_to_start() {
    let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let refused = web::serve(Arc::new(MemStore::new()), settings(), common::clock, any, None).await;
    let message = refused.expect_err("serving 0.0.0.0 without a token").to_string();
    assert!(message.contains("set a token (KANBAN_SERVE_TOKEN"), "{message}");
    let check = |token| web::check_bind(any, Some(token), web::SERVE_TOKEN_SOURCES);
    for weak in [
        "",
        "                    ",
        "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t",
        "tok-5b1e0c9d7a3",
        "tok 5b1e0c9d7a3f42e8",
        "tok-5b1e0c9d7a3f42e8\n",
        "aaaaaaaaaaaaaaaaaaaaaaaa",
        "abcabcabcabcabcabcabcabc",
    ] {
        let refused = check(weak).expect_err(&format!("{weak:?} was accepted"));
        assert!(
            refused.to_string().contains("at least 16 characters"),
            "{refused}"
        );
    }
    let loopback = |addr: &str| web::check_bind(addr.parse().unwrap(), None, web::SERVE_TOKEN_SOURCES);
    assert!(loopback("127.0.0.1:8420").is_ok());
    assert!(loopback("[::1]:8420").is_ok());
    assert!(check(TOKEN).is_ok());
}

async fn status_of(s: &Served, request: reqwest::RequestBuilder) -> u16 {
    let r = request.send().await.expect("send");
    let status = r.status().as_u16();
    if matches!(status, 401 | 403) {
        // The refused request's body was never read: the connection ends with it.
        assert_eq!(
            r.headers().get("connection").and_then(|v| v.to_str().ok()),
            Some("close"),
            "a refusal keeps its connection open"
        );
    }
    if status >= 400 {
        let body: serde_json::Value = r.json().await.expect("a JSON error");
        error(&body);
    }
    let _ = s;
    status
}

#[tokio::test(flavor = "multi_thread")]
async fn bound_beyond_loopback_every_request_needs_the_token() {
    let s = serve_at("0.0.0.0", settings(), Some(TOKEN)).await;
    let c = &s.client;
    for path in [
        "/",
        "/api/tasks",
        "/api/events",
        "/stats",
        "/assets/board.js",
        "/nowhere",
    ] {
        assert_eq!(
            status_of(&s, c.get(s.url(path))).await,
            401,
            "{path} without a token"
        );
        assert_eq!(
            status_of(&s, c.get(s.url(path)).bearer_auth("wrong")).await,
            401,
            "{path} wrong token"
        );
    }
    let create = || c.post(s.url("/api/tasks")).json(&json!({ "title": "x" }));
    assert_eq!(status_of(&s, create()).await, 401);
    assert_eq!(status_of(&s, create().bearer_auth(&TOKEN[1..])).await, 401);
    assert_eq!(status_of(&s, create().bearer_auth(TOKEN)).await, 201);
    assert_eq!(
        status_of(&s, c.get(s.url("/api/tasks")).bearer_auth(TOKEN)).await,
        200
    );
    assert_eq!(status_of(&s, c.get(s.url("/api/tasks?token=wrong"))).await, 401);

    // A page opened with ?token= gets a cookie, and the cookie then suffices.
    let r = c.get(s.url(&format!("/?token={TOKEN}"))).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    assert_eq!(
        status_of(&s, c.get(s.url("/api/tasks")).header("cookie", pair)).await,
        200
    );
    assert_eq!(
        status_of(&s, c.get(s.url("/api/tasks")).header("cookie", "kanban_token=no")).await,
        401
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_from_another_origin_and_foreign_hosts_are_refused() {
    let s = serve().await;
    let c = &s.client;
    let create = || c.post(s.url("/api/tasks")).json(&json!({ "title": "x" }));
    assert_eq!(
        status_of(&s, create().header("origin", "http://evil.example")).await,
        403
    );
    let own = format!("http://{}", s.addr);
    assert_eq!(status_of(&s, create().header("origin", own)).await, 201);
    assert_eq!(status_of(&s, create()).await, 201, "programs send no Origin");

    // Without a token the server reads only, on loopback only: any local process
    // reaches loopback, another user's or a sandboxed worker's among them.
    let s = serve_at("127.0.0.1", settings(), None).await;
    let c = &s.client;
    let own = format!("http://{}", s.addr);
    for write in [
        c.post(s.url("/api/tasks")).json(&json!({ "title": "x" })),
        c.post(s.url("/api/tasks"))
            .header("origin", own)
            .json(&json!({ "title": "x" })),
    ] {
        assert_eq!(status_of(&s, write).await, 401);
    }
    assert_eq!(events_on(&s), 0, "a write without a token changed the board");
    assert_eq!(status_of(&s, c.get(s.url("/api/tasks"))).await, 200);
    // A name that resolves here by DNS rebinding is not this loopback server.
    let foreign = c
        .get(s.url("/api/tasks"))
        .header("host", format!("evil.example:{}", s.addr.port()));
    assert_eq!(status_of(&s, foreign).await, 403);
    let local = c
        .get(s.url("/api/tasks"))
        .header("host", format!("localhost:{}", s.addr.port()));
    assert_eq!(status_of(&s, local).await, 200);
}

/// How a client may present a token.
#[derive(Clone, Copy, Debug)]
enum Presented {
    Bearer,
    Cookie,
    Query,
}

/// A card-creating `POST` carrying `token` the way `how` says.
fn create_with(s: &Served, how: Presented, token: &str) -> reqwest::RequestBuilder {
    let path = match how {
        Presented::Query => format!("/api/tasks?token={token}"),
        _ => "/api/tasks".to_owned(),
    };
    let request = s.client.post(s.url(&path)).json(&json!({ "title": "x" }));
    match how {
        Presented::Bearer => request.header("authorization", format!("Bearer {token}")),
        Presented::Cookie => request.header("cookie", format!("kanban_token={token}")),
        Presented::Query => request,
    }
}

/// Tokens a guesser gets close with: the last byte changed, a proper prefix, nothing at
/// all, and the token with one byte more.
fn near_misses() -> Vec<String> {
    let (head, last) = TOKEN.split_at(TOKEN.len() - 1);
    let mut near: Vec<String> = ["9", "7", "X"]
        .iter()
        .filter(|b| **b != last)
        .map(|b| format!("{head}{b}"))
        .collect();
    near.extend([head.to_owned(), TOKEN[..4].to_owned(), String::new()]);
    near.extend([
        format!("{TOKEN}{last}"),
        format!("{TOKEN}x"),
        format!("{TOKEN}%20"),
    ]);
    near
}

fn events_on(s: &Served) -> u64 {
    s.store.count_events(&board_core::EventFilter::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_that_is_nearly_right_is_refused_every_way_it_comes() {
    let s = serve_at("0.0.0.0", settings(), Some(TOKEN)).await;
    for how in [Presented::Bearer, Presented::Cookie, Presented::Query] {
        for wrong in near_misses() {
            let r = create_with(&s, how, &wrong).send().await.expect("send");
            assert!(
                r.headers().get("set-cookie").is_none(),
                "{how:?} {wrong:?} was given the cookie"
            );
            let status = r.status().as_u16();
            assert_eq!(status, 401, "{how:?} {wrong:?}: {}", r.text().await.unwrap());
            assert_eq!(
                status_of(&s, create_with(&s, how, &wrong)).await,
                401,
                "{how:?} {wrong:?}"
            );
            let read = match how {
                Presented::Query => s.client.get(s.url(&format!("/api/tasks?token={wrong}"))),
                Presented::Bearer => s.client.get(s.url("/api/tasks")).bearer_auth(&wrong),
                Presented::Cookie => s
                    .client
                    .get(s.url("/api/tasks"))
                    .header("cookie", format!("kanban_token={wrong}")),
            };
            assert_eq!(status_of(&s, read).await, 401, "{how:?} {wrong:?} read");
        }
        assert_eq!(events_on(&s), 0, "a refused {how:?} write changed the board");
    }
    for (n, how) in [Presented::Bearer, Presented::Cookie, Presented::Query]
        .into_iter()
        .enumerate()
    {
        assert_eq!(status_of(&s, create_with(&s, how, TOKEN)).await, 201, "{how:?}");
        assert_eq!(events_on(&s), n as u64 + 1, "{how:?} made one card");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_origin_other_than_the_boards_own_pages_cannot_write() {
    let token_board = serve_at("0.0.0.0", settings(), Some(TOKEN)).await;
    let loopback = serve().await;
    for s in [&token_board, &loopback] {
        let create = |origin: String| {
            s.client
                .post(s.url("/api/tasks"))
                .bearer_auth(TOKEN)
                .header("origin", origin)
                .json(&json!({ "title": "x" }))
        };
        let (ip, port) = (s.addr.ip(), s.addr.port());
        let other_port = if port == 65535 { port - 1 } else { port + 1 };
        for foreign in [
            format!("http://{ip}:{other_port}"),
            format!("http://{ip}"),
            format!("http://{ip}:{port}0"),
            format!("http://localhost:{port}"),
            format!("http://{ip}:{port}.evil.example"),
            format!("ftp://{ip}:{port}"),
            format!("{ip}:{port}"),
            "null".to_owned(),
        ] {
            assert_eq!(status_of(s, create(foreign.clone())).await, 403, "{foreign}");
        }
        assert_eq!(events_on(s), 0, "a refused write changed the board");
        // The board's own pages: over HTTP, or over HTTPS from a proxy that passes the
        // Host on (the guard cannot tell the two apart, and neither is another site).
        for own in [format!("http://{ip}:{port}"), format!("HTTPS://{ip}:{port}")] {
            assert_eq!(status_of(s, create(own.clone())).await, 201, "{own}");
        }
    }
}

/// A request written by hand, for headers no HTTP client sends (an empty `Host`).
async fn raw(s: &Served, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer));
    read.await.expect("an answer within 10 s").expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_opaque_origin_cannot_write_even_without_a_host() {
    let s = serve_at("0.0.0.0", settings(), Some(TOKEN)).await;
    let body = r#"{"title":"x"}"#;
    for origin in ["null", "http://", "https://"] {
        let answer = raw(
            &s,
            &format!(
                "POST /api/tasks HTTP/1.1\r\nHost:\r\nOrigin: {origin}\r\n\
                 Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{origin}: {answer}");
    }
    assert_eq!(events_on(&s), 0, "a refused write changed the board");
}

/// Everything the server answers, raw: status line, headers and body.
async fn everything(s: &Served, token: &str) -> String {
    let t = s.task("secret-free card");
    let mut out = String::new();
    let c = &s.client;
    let paths = [
        "/".to_owned(),
        "/stats".to_owned(),
        format!("/tasks/{}", t.id),
        format!("/tasks/{}/drawer", t.id),
        "/api/lane-list".to_owned(),
        "/api/tasks".to_owned(),
        format!("/api/tasks/{}", t.id),
        "/api/cards".to_owned(),
        "/api/tasks/t_00000000".to_owned(),
        "/api/tasks?status=nope".to_owned(),
        "/nowhere".to_owned(),
    ];
    for path in &paths {
        for auth in [None, Some(token), Some("wrong")] {
            let mut request = c.get(s.url(path));
            if let Some(a) = auth {
                request = request.bearer_auth(a);
            }
            let r = request.send().await.unwrap();
            let headers: Vec<String> = r
                .headers()
                .iter()
                .filter(|(name, _)| *name != "set-cookie")
                .map(|(n, v)| format!("{n}: {v:?}"))
                .collect();
            out.push_str(&format!(
                "{path} {} {}\n{}\n",
                r.status(),
                headers.join("\n"),
                r.text().await.unwrap()
            ));
        }
    }
    for action in [
        "edit", "comment", "assign", "unblock", "reclaim", "archive", "move",
    ] {
        let r = c
            .post(s.url(&format!("/api/tasks/{}/{action}", t.id)))
            .bearer_auth(token)
            .json(&json!({ "bogus": true }))
            .send()
            .await
            .unwrap();
        out.push_str(&r.text().await.unwrap());
    }
    let mut stream = c
        .get(s.url("/api/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.chunk()).await;
    let chunk = read.expect("an event within 5 s").unwrap().expect("a chunk");
    out.push_str(&String::from_utf8_lossy(&chunk));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn no_response_or_stream_carries_a_secret_of_the_environment() {
    const KEY: &str = "sk-canary-0d4c7e91b2a8f356";
    const PASSWORD: &str = "pw-canary-61e9a3c0f7d2b48e";
    // Where a model key and a database password live in a real deployment.
    std::env::set_var("OPENAI_API_KEY", KEY);
    std::env::set_var("PGPASSWORD", PASSWORD);
    std::env::set_var(
        "DATABASE_URL",
        format!("postgres://kanban:{PASSWORD}@127.0.0.1/kanban"),
    );
    let s = serve_at("0.0.0.0", settings(), Some(TOKEN)).await;
    let seen = everything(&s, TOKEN).await;
    assert!(
        seen.contains("secret-free card"),
        "the crawl reached the board: {seen}"
    );
    for secret in [KEY, PASSWORD, TOKEN] {
        for piece in secret.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(!seen.contains(piece), "{piece:?} of a secret was served:\n{seen}");
        }
    }
}

/// A card's log as a caller of the web board reads it: its file in `dir`.
fn read_logs_in(dir: &std::path::Path) -> web::LogRead {
    common::logs_in(dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workers_log_is_shown_without_secrets_or_control_characters() {
    const KEY: &str = "sk-logcanary-93b7e1d0c4a6f258";
    let logs = tempfile::tempdir().unwrap();
    let s = serve_at(
        "127.0.0.1",
        web::Settings {
            log: Some(read_logs_in(logs.path())),
            secrets: vec![KEY.to_owned()],
            ..settings()
        },
        None,
    )
    .await;
    let t = s.task("prints things");
    s.store.claim(&t.id, 900, common::NOW).unwrap();
    let printed = format!(
        "step one\n\x1b]0;owned\x07\x1b[2Jstep two\r\nmy key is {KEY}, or ...{}\n\u{9b}31mred\n",
        &KEY[KEY.len() - 10..]
    );
    std::fs::write(logs.path().join(format!("{}.log", t.id)), printed).unwrap();
    let html = s
        .client
        .get(s.url(&format!("/tasks/{}", t.id)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Worker log"), "{html}");
    assert!(
        html.contains("step one\n ]0;owned  [2Jstep two \nmy key is [redacted]"),
        "{html}"
    );
    for c in html.chars() {
        assert!(!c.is_control() || c == '\n', "{c:?} served in {html}");
    }
    for piece in KEY.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).unwrap();
        assert!(!html.contains(piece), "{piece:?} of the key served:\n{html}");
    }
}

/// Half-open connections (headers never finished), more than the server holds at once,
/// are closed after the header timeout while a real request still gets its answer, and
/// event streams beyond their cap are refused with 503. (That the cap bounds a server's
/// descriptors is shown on the gateway's metrics port: `deploy::a_flood_of_half_open_*`.)
#[tokio::test(flavor = "multi_thread")]
async fn half_open_connections_are_closed_and_streams_are_capped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = web::Limits {
        connections: 8,
        streams: 2,
        header_timeout: Duration::from_millis(300),
    };
    let s = serve_at("127.0.0.1", web::Settings { limits, ..settings() }, Some(TOKEN)).await;
    let mut stalled = Vec::new();
    for _ in 0..30 {
        let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        stream
            .write_all(b"GET /api/tasks HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        stalled.push(stream);
    }
    let answered = s
        .client
        .get(s.url("/api/tasks"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        answered.status().as_u16(),
        200,
        "a real request waits its turn, then is served"
    );
    for mut stream in stalled {
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await;
        assert!(
            matches!(closed, Ok(Ok(_) | Err(_))),
            "a connection that never finished its headers was held open"
        );
    }

    // New connections: the pooled one of the request above sat idle past the header
    // timeout, and the server may be closing it just as a reused request goes out.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let open = |_| fresh.get(s.url("/api/events")).bearer_auth(TOKEN).send();
    let first = open(0).await.unwrap();
    let second = open(1).await.unwrap();
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let third = open(2).await.unwrap();
    assert_eq!(third.status().as_u16(), 503);
    let body: serde_json::Value = third.json().await.unwrap();
    assert!(error(&body).contains("2 event streams open"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn files_download_as_files_and_only_raster_images_show_inline() {
    use board_core::{AttachmentShelf, NewAttachment};
    let s = serve().await;
    let t = s.task("with files");
    let file = |name: &str, kind: &str, content: &[u8]| NewAttachment {
        name: name.into(),
        content_type: Some(kind.into()),
        created_by: None,
        content: content.to_vec(),
    };
    let page = s
        .store
        .attach(
            &t.id,
            &file("<i>x.html", "text/html", b"<script>alert(1)</script>"),
            NOW,
        )
        .unwrap();
    let png = s
        .store
        .attach(&t.id, &file("dot.png", "image/png", b"\x89PNG"), NOW)
        .unwrap();
    let (_, shown) = s.get(&format!("/api/tasks/{}", t.id)).await;
    assert_eq!(shown["attachments"][1]["name"], "dot.png");

    let fetch = |path: String| {
        let client = s.client.clone();
        let url = s.url(&path);
        async move { client.get(url).send().await.unwrap() }
    };
    for inline in ["", "?inline=true"] {
        let r = fetch(format!("/api/attachments/{}{inline}", page.id)).await;
        assert_eq!(r.status().as_u16(), 200);
        let h = r.headers().clone();
        assert_eq!(h["content-type"], "application/octet-stream");
        assert!(h["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename*=UTF-8''%3Ci%3Ex.html"));
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert!(h["content-security-policy"].to_str().unwrap().contains("sandbox"));
        assert_eq!(r.bytes().await.unwrap().as_ref(), b"<script>alert(1)</script>");
    }
    let r = fetch(format!("/api/attachments/{}?inline=true", png.id)).await;
    assert_eq!(r.headers()["content-type"], "image/png");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("inline"));

    let html = s.text(&format!("/tasks/{}", t.id)).await;
    assert!(
        html.contains("&lt;i&gt;x.html") && !html.contains("<i>x.html"),
        "{html}"
    );
    assert!(
        html.contains(&format!("<img src=\"api/attachments/{}?inline=true\"", png.id)),
        "{html}"
    );
    assert!(
        !html.contains(&format!("<img src=\"api/attachments/{}?", page.id)),
        "{html}"
    );

    assert_eq!(s.get("/api/attachments/999").await.0, 404);
    assert_eq!(s.get("/api/attachments/x").await.0, 400);
    assert_eq!(
        s.get(&format!("/api/attachments/{}?inline=maybe", png.id))
            .await
            .0,
        400
    );
}
