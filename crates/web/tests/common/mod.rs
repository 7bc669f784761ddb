//! A board served on an ephemeral loopback port for one test, and a client for it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use board_core::{BoardReads, BoardWrites};
use board_core::{NewTask, Store, Task};
use board_sqlite::{Options, SqliteStore};
use serde_json::Value;

pub struct Served {
    pub base: String,
    pub addr: SocketAddr,
    pub store: Arc<SqliteStore>,
    pub client: reqwest::Client,
    _home: tempfile::TempDir,
}

/// The system clock in Unix seconds: the clock the served board runs on.
pub fn clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub fn settings() -> web::Settings {
    web::Settings {
        max_text_bytes: 4096,
        max_request_bytes: 16 * 1024,
        poll_interval: Duration::from_millis(20),
        ..web::Settings::default()
    }
}

/// The token of the board [`serve`] starts, which its client sends with every request.
pub const TOKEN: &str = "tok-5b1e0c9d7a3f42e8";

/// Serves a fresh board on `ip` port 0; its client sends no token of its own.
pub async fn serve_at(ip: &str, settings: web::Settings, token: Option<&str>) -> Served {
    let home = tempfile::tempdir().expect("temp dir");
    let store =
        Arc::new(SqliteStore::open(home.path().join("kanban.db"), &Options::default()).expect("open"));
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let shared: Arc<dyn Store> = store.clone();
    let token = token.map(str::to_owned);
    tokio::spawn(async move { web::serve_on(listener, shared, settings, clock, token).await });
    // Whatever the bind, the test's own traffic stays on loopback.
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    Served {
        base: format!("http://{addr}"),
        addr,
        store,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client"),
        _home: home,
    }
}

/// A board on loopback behind [`TOKEN`], with a client that always presents it.
pub async fn serve() -> Served {
    serve_with(settings()).await
}

/// [`serve`] with `settings`.
pub async fn serve_with(settings: web::Settings) -> Served {
    let mut served = serve_at("127.0.0.1", settings, Some(TOKEN)).await;
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {TOKEN}").parse().expect("a header value");
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    served.client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .default_headers(headers)
        .build()
        .expect("client");
    served
}

pub const NOW: i64 = 1_700_000_000;

impl Served {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn store_path(&self) -> std::path::PathBuf {
        self._home.path().join("kanban.db")
    }

    pub fn task(&self, title: &str) -> Task {
        self.store.create(&NewTask::titled(title), NOW).expect("create")
    }

    /// A page's text.
    pub async fn text(&self, path: &str) -> String {
        let r = self.client.get(self.url(path)).send().await.expect("send");
        r.text().await.expect("a text body")
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(self.url(path)).send().await.expect("send");
        let status = r.status().as_u16();
        (status, r.json().await.expect("a JSON body"))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        (status, r.json().await.expect("a JSON body"))
    }
}

/// The `error` of a JSON error body, asserting there is one.
pub fn error(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("not a JSON error: {body}"))
}

/// Two boards on one server behind [`TOKEN`] (docs/boards.md): `main`, the current one,
/// with the task "on main", and `ops` ("Ops <script>") with "on ops"; the server's
/// address and both stores.
pub async fn serve_two_boards() -> (
    String,
    Arc<board_core::memory::MemStore>,
    Arc<board_core::memory::MemStore>,
) {
    use board_core::memory::MemStore;
    let (main, ops) = (Arc::new(MemStore::new()), Arc::new(MemStore::new()));
    main.create(&NewTask::titled("on main"), NOW).unwrap();
    ops.create(&NewTask::titled("on ops"), NOW).unwrap();
    let served = |slug: &str, name: &str, store: &Arc<MemStore>| web::ServedBoard {
        slug: slug.into(),
        name: name.into(),
        store: store.clone() as Arc<dyn Store>,
        settings: settings(),
    };
    let boards = vec![served("main", "Main", &main), served("ops", "Ops <script>", &ops)];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        web::serve_boards_on(listener, boards, "main", clock, Some(TOKEN.to_owned())).await
    });
    (format!("http://{addr}"), main, ops)
}

/// A card's worker log read as `kanban serve` reads it (`LogRead`'s contract), from the
/// file `ID.log` in `dir`.
pub fn logs_in(dir: &std::path::Path) -> web::LogRead {
    let dir = dir.to_owned();
    Arc::new(move |id, from, max| {
        let bytes = std::fs::read(dir.join(format!("{id}.log"))).ok()?;
        let len = bytes.len() as u64;
        let start = match from {
            Some(from) if from <= len => from,
            Some(_) => 0,
            None => len.saturating_sub(max),
        };
        let end = len.min(start + max);
        Some(web::LogSpan {
            start,
            bytes: bytes[start as usize..end as usize].to_vec(),
        })
    })
}

/// Work of `id` reported by its worker under checks that send it to review.
pub fn into_review(s: &Served, id: &board_core::TaskId, evidence: serde_json::Value) {
    let offer = board_core::Offer {
        task: id.clone(),
        assign: None,
        kind: board_core::RunKind::Work,
        checks: board_core::Checks {
            review: true,
            reviewer: Some("critic".into()),
            ..board_core::Checks::default()
        },
    };
    let claim = s.store.claim_offer(&offer, 60, None, NOW).unwrap();
    let completion = board_core::Completion {
        expected_run_id: Some(claim.run_id),
        evidence: Some(evidence),
        ..board_core::Completion::default()
    };
    assert!(s.store.complete(id, &completion, NOW).unwrap());
    assert_eq!(s.store.get(id).unwrap().status, board_core::Status::Review);
}

/// A server whose decompose action calls `fake` with `key`, as `kanban serve` builds it
/// from a home's config.
pub async fn serve_with_model(fake: &fake_llm::FakeLlm, key: &str) -> Served {
    let model = decompose::DecomposerSettings {
        base_url: fake.base_url(),
        model: "fake".into(),
        api_key: Some(decompose::ApiKey::new(key)),
        api_key_env: None,
        transient_retries: 0,
        retry_backoff: std::time::Duration::ZERO,
        ..decompose::DecomposerSettings::default()
    };
    let settings = web::Settings {
        decomposer: web::Decomposer::new(model)
            .map(std::sync::Arc::new)
            .map_err(|e| e.to_string()),
        ..settings()
    };
    serve_with(settings).await
}
