//! The model client at its boundary: `call_model` over the real `HttpModel` against a
//! wiremock server on 127.0.0.1, checked through the `llm_calls` rows it bills.

use std::sync::Arc;
use std::time::{Duration, Instant};

use board_core::memory::MemStore;
use board_core::BoardWrites;
use board_core::LlmPurpose;
use board_core::{LlmCall, NewTask, Store, TaskId};
use decompose::{call_model, ApiKey, CallFailure, DecomposerSettings, FailureKind, HttpModel, ModelReply};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const NOW: i64 = 1_700_000_000;

struct Board {
    store: Arc<dyn Store>,
    card: TaskId,
}

fn board() -> Board {
    let store = MemStore::new();
    let card = store
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("a card")
            },
            NOW,
        )
        .unwrap()
        .id;
    Board {
        store: Arc::new(store),
        card,
    }
}

fn settings(base_url: &str) -> DecomposerSettings {
    DecomposerSettings {
        base_url: base_url.to_owned(),
        model: "test-model".to_owned(),
        api_key_env: None,
        timeout: Duration::from_secs(5),
        retry_backoff: Duration::ZERO,
        ..DecomposerSettings::default()
    }
}

fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46 },
    })
}

async fn call(board: &Board, settings: &DecomposerSettings) -> Result<ModelReply, CallFailure> {
    let client = HttpModel::new(settings).unwrap();
    let body = json!({ "model": settings.model, "messages": [] });
    call_model(
        &client,
        &(board.store.clone() as _),
        &decompose::Attempt::manual(&board.card),
        LlmPurpose::Decompose,
        &body,
        settings,
        &|| NOW,
    )
    .await
}

fn rows(board: &Board) -> Vec<LlmCall> {
    board.store.llm_calls(Some(&board.card)).unwrap()
}

fn outcomes(board: &Board) -> Vec<(String, Option<i64>)> {
    rows(board)
        .into_iter()
        .map(|r| (r.outcome.as_str().to_owned(), r.http_status))
        .collect()
}

#[tokio::test]
async fn a_success_bills_one_row_with_its_tokens() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("hello")))
        .mount(&server)
        .await;
    let board = board();
    let reply = call(&board, &settings(&format!("{}/v1", server.uri())))
        .await
        .unwrap();
    assert_eq!(reply.content, "hello");
    let rows = rows(&board);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row.purpose.as_str(), row.model.as_str(), row.outcome.as_str()),
        ("decompose", "test-model", "ok")
    );
    assert_eq!(
        (row.http_status, row.prompt_tokens, row.completion_tokens),
        (Some(200), Some(12), Some(34))
    );
    assert_eq!((row.started_at, row.error.as_deref()), (NOW, None));
}

#[tokio::test]
async fn a_500_then_a_success_bills_both_requests() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(500).set_body_json(json!({ "error": { "message": "overloaded" } })),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("second time")))
        .mount(&server)
        .await;
    let board = board();
    let settings = DecomposerSettings {
        transient_retries: 1,
        ..settings(&server.uri())
    };
    let reply = call(&board, &settings).await.unwrap();
    assert_eq!(reply.content, "second time");
    assert_eq!(
        outcomes(&board),
        vec![("http_error".to_owned(), Some(500)), ("ok".to_owned(), Some(200))]
    );
    assert_eq!(
        rows(&board)[0].error.as_deref(),
        Some("model answered HTTP 500: overloaded")
    );
}

#[tokio::test]
async fn retries_run_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let board = board();
    let failure = call(&board, &settings(&server.uri())).await.unwrap_err();
    assert_eq!(
        (failure.kind, failure.http_status),
        (FailureKind::HttpError, Some(503))
    );
    assert_eq!(rows(&board).len(), 3, "one request and two retries, each billed");
}

#[tokio::test]
async fn a_429_waits_for_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "1"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&server)
        .await;
    let board = board();
    let started = Instant::now();
    call(&board, &settings(&server.uri())).await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "Retry-After ignored: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(10),
        "waited far too long: {waited:?}"
    );
    assert_eq!(
        outcomes(&board),
        vec![("http_error".to_owned(), Some(429)), ("ok".to_owned(), Some(200))]
    );
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400).set_body_json(json!({ "error": { "message": "bad model" } })),
        )
        .mount(&server)
        .await;
    let board = board();
    let failure = call(&board, &settings(&server.uri())).await.unwrap_err();
    assert_eq!(failure.to_string(), "model answered HTTP 400: bad model");
    assert_eq!(outcomes(&board), vec![("http_error".to_owned(), Some(400))]);
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_body_over_one_mib_is_refused() {
    let server = MockServer::start().await;
    let huge = "x".repeat(1024 * 1024 + 1);
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(&huge)))
        .mount(&server)
        .await;
    let board = board();
    let failure = call(&board, &settings(&server.uri())).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::TooLarge);
    assert!(failure.to_string().contains("response too large"), "{failure}");
    assert_eq!(outcomes(&board), vec![("too_large".to_owned(), Some(200))]);
}

#[tokio::test]
async fn a_2xx_that_is_not_a_completion_is_a_bad_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>hello</html>"))
        .mount(&server)
        .await;
    let board = board();
    let failure = call(&board, &settings(&server.uri())).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::BadResponse);
    assert_eq!(outcomes(&board), vec![("bad_response".to_owned(), Some(200))]);
}

#[tokio::test]
async fn a_slow_server_times_out_once() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(10)))
        .mount(&server)
        .await;
    let board = board();
    let settings = DecomposerSettings {
        timeout: Duration::from_millis(300),
        ..settings(&server.uri())
    };
    let started = Instant::now();
    let failure = call(&board, &settings).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(failure.kind, FailureKind::Timeout);
    assert_eq!(failure.to_string(), "model call timed out after 0.3s");
    assert_eq!(
        outcomes(&board),
        vec![("timeout".to_owned(), None)],
        "a timeout is not retried"
    );
}

#[tokio::test]
async fn a_closed_port_is_a_connection_error_and_retried() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let board = board();
    let settings = DecomposerSettings {
        transient_retries: 1,
        ..settings(&format!("http://127.0.0.1:{port}/v1"))
    };
    let failure = call(&board, &settings).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::ConnectionError);
    assert!(
        failure.to_string().starts_with("cannot reach the model"),
        "{failure}"
    );
    assert_eq!(
        outcomes(&board),
        vec![
            ("connection_error".to_owned(), None),
            ("connection_error".to_owned(), None)
        ]
    );
}

#[tokio::test]
async fn the_authorization_header_goes_only_with_a_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&server)
        .await;
    let board = board();
    call(&board, &settings(&server.uri())).await.unwrap();
    let keyed = DecomposerSettings {
        api_key: Some(ApiKey::new("sk-test-key")),
        ..settings(&server.uri())
    };
    call(&board, &keyed).await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].url.path(), "/chat/completions");
    assert!(requests[0].headers.get("authorization").is_none());
    assert_eq!(
        requests[1]
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap()),
        Some("Bearer sk-test-key")
    );
}

#[test]
fn a_key_from_the_environment_variable_is_used_when_none_is_configured() {
    // A variable name no other test touches, so setting it is safe in parallel tests.
    let name = "DECOMPOSE_CLIENT_TEST_KEY";
    std::env::set_var(name, "sk-from-env");
    let settings = DecomposerSettings {
        api_key_env: Some(name.to_owned()),
        ..DecomposerSettings::default()
    };
    assert_eq!(
        settings.resolved_api_key().map(|k| k.expose().to_owned()),
        Some("sk-from-env".into())
    );
    let configured = DecomposerSettings {
        api_key: Some(ApiKey::new("sk-configured")),
        ..settings
    };
    assert_eq!(
        configured.resolved_api_key().map(|k| k.expose().to_owned()),
        Some("sk-configured".into())
    );
    assert_eq!(
        format!("{configured:?}").matches("sk-").count(),
        0,
        "Debug shows no key"
    );
}

/// A stand-in model: the trait is what the decomposer needs, not HTTP.
struct Scripted(&'static str);

impl decompose::ModelClient for Scripted {
    async fn send(&self, _body: &Value) -> Result<ModelReply, CallFailure> {
        Ok(ModelReply {
            content: self.0.to_owned(),
            http_status: 200,
            prompt_tokens: None,
            completion_tokens: None,
        })
    }
}

#[tokio::test]
async fn the_model_client_can_be_swapped() {
    let board = board();
    let settings = settings("http://127.0.0.1:9");
    let client = Scripted(r#"{"fanout": false, "title": "Tightened"}"#);
    let outcome = decompose::decompose(
        board.store.clone(),
        &client,
        &board.card,
        board_core::Mode::Automatic,
        &settings,
        &|| NOW,
    )
    .await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(board.store.get(&board.card).unwrap().title, "Tightened");
    assert_eq!(outcomes(&board), vec![("ok".to_owned(), Some(200))]);
}

#[tokio::test]
async fn https_is_spoken_for_hosted_providers() {
    // A plain-HTTP server behind an https:// URL: the client attempts a TLS handshake
    // (which fails), rather than refusing the scheme for want of a TLS backend.
    let server = MockServer::start().await;
    let url = server.uri().replace("http://", "https://");
    let board = board();
    let failure = call(&board, &settings(&url)).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::ConnectionError, "{failure}");
    assert!(!failure.to_string().contains("scheme"), "{failure}");
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// Reads the card's ledger while its request is out, then answers.
struct Watching {
    store: Arc<dyn Store>,
    card: TaskId,
    seen: std::sync::Mutex<Vec<Vec<LlmCall>>>,
}

impl decompose::ModelClient for Watching {
    async fn send(&self, _body: &Value) -> Result<ModelReply, CallFailure> {
        let ledger = self.store.llm_calls(Some(&self.card)).unwrap();
        self.seen.lock().unwrap().push(ledger);
        Ok(ModelReply {
            content: "hello".to_owned(),
            http_status: 200,
            prompt_tokens: Some(3),
            completion_tokens: Some(4),
        })
    }
}

async fn call_with(
    client: &impl decompose::ModelClient,
    store: &Arc<dyn Store>,
    card: &TaskId,
) -> Result<ModelReply, CallFailure> {
    let settings = settings("http://127.0.0.1:9");
    let body = json!({ "model": settings.model, "messages": [] });
    let attempt = decompose::Attempt::manual(card);
    call_model(
        client,
        &(store.clone() as _),
        &attempt,
        LlmPurpose::Decompose,
        &body,
        &settings,
        &|| NOW,
    )
    .await
}

#[tokio::test]
async fn a_request_is_billed_before_it_goes_out() {
    let board = board();
    let client = Watching {
        store: Arc::clone(&board.store),
        card: board.card.clone(),
        seen: Default::default(),
    };
    call_with(&client, &board.store, &board.card).await.unwrap();
    let seen = client.seen.into_inner().unwrap();
    let while_out: Vec<(&str, i64, Option<i64>)> = seen[0]
        .iter()
        .map(|r| (r.outcome.as_str(), r.started_at, r.http_status))
        .collect();
    assert_eq!(while_out, vec![("sent", NOW, None)], "billed before the answer");
    assert_eq!(seen.len(), 1);
    let rows = rows(&board);
    assert_eq!(rows.len(), 1, "the same row, finished");
    assert_eq!(
        (
            rows[0].outcome.as_str(),
            rows[0].http_status,
            rows[0].prompt_tokens
        ),
        ("ok", Some(200), Some(3))
    );
}

/// Counts the requests it is asked to send, and answers each.
struct Counting(std::sync::atomic::AtomicUsize);

impl decompose::ModelClient for Counting {
    async fn send(&self, _body: &Value) -> Result<ModelReply, CallFailure> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(ModelReply {
            content: "hello".to_owned(),
            http_status: 200,
            prompt_tokens: None,
            completion_tokens: None,
        })
    }
}

#[tokio::test]
async fn a_request_whose_bill_cannot_be_written_is_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let card = {
        let store = board_sqlite::SqliteStore::open(&path, &board_sqlite::Options::default()).unwrap();
        let triage = NewTask {
            triage: true,
            ..NewTask::titled("a card")
        };
        store.create(&triage, NOW).unwrap().id
    };
    // Read-only: every write fails, the ledger's first.
    let store: Arc<dyn Store> = Arc::new(board_sqlite::SqliteStore::open_read_only(&path).unwrap());
    let client = Counting(Default::default());
    let failure = call_with(&client, &store, &card).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::NotSent, "{failure}");
    assert!(!failure.was_sent() && !failure.is_provider_fault() && !failure.is_transient());
    assert_eq!(client.0.into_inner(), 0, "nothing went out");
    assert!(store.llm_calls(None).unwrap().is_empty());
}
