//! What the model client refuses to do with the card and the key: follow a redirect,
//! quote the key (whole or cut) or the base URL's credentials, or send the key over plain
//! HTTP to another machine.

use std::sync::Arc;
use std::time::Duration;

use board_core::memory::MemStore;
use board_core::LlmPurpose;
use board_core::{NewTask, Store, TaskId};
use decompose::{call_model, ApiKey, CallFailure, DecomposerSettings, FailureKind, HttpModel};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const NOW: i64 = 1_700_000_000;
const KEY: &str = "sk-live-0123456789abcdefghij";

fn settings(base_url: &str) -> DecomposerSettings {
    DecomposerSettings {
        base_url: base_url.to_owned(),
        api_key_env: None,
        timeout: Duration::from_secs(10),
        retry_backoff: Duration::ZERO,
        transient_retries: 0,
        ..DecomposerSettings::default()
    }
}

/// Sends one call for a fresh card; returns the failure and the card's ledger rows as
/// `(outcome, status, error)`.
async fn failed_call(settings: &DecomposerSettings) -> (CallFailure, Vec<(String, Option<i64>, String)>) {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let card: TaskId = store
        .create(&NewTask::titled("secret card text"), NOW)
        .unwrap()
        .id;
    let client = HttpModel::new(settings).unwrap();
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "secret card text" }] });
    let failure = call_model(
        &client,
        &(store.clone() as _),
        &decompose::Attempt::manual(&card),
        LlmPurpose::Decompose,
        &body,
        settings,
        &|| NOW,
    )
    .await
    .unwrap_err();
    let rows = store
        .llm_calls(Some(&card))
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                r.outcome.as_str().to_owned(),
                r.http_status,
                r.error.unwrap_or_default(),
            )
        })
        .collect();
    (failure, rows)
}

/// Makes `server` answer every request with an OpenAI-shaped error.
async fn answer_error(server: &MockServer, status: u16, message: impl std::fmt::Display) {
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(status).set_body_json(json!({
            "error": { "message": message.to_string() }
        })))
        .mount(server)
        .await;
}

/// Whether `text` holds `secret` or any 8-character piece of it.
fn leaks(text: &str, secret: &str) -> bool {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 8 {
        return text.contains(secret);
    }
    chars
        .windows(8)
        .any(|w| text.contains(&w.iter().collect::<String>()))
}

#[tokio::test]
async fn a_cross_origin_redirect_is_not_followed_and_is_one_ledger_row() {
    let elsewhere = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{ "message": { "content": "{}" } }]
        })))
        .mount(&elsewhere)
        .await;
    let origin = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(307)
                .insert_header("location", format!("{}/chat/completions", elsewhere.uri())),
        )
        .mount(&origin)
        .await;

    let (failure, rows) = failed_call(&settings(&origin.uri())).await;

    assert_eq!(failure.kind, FailureKind::HttpError, "{failure}");
    assert_eq!(failure.http_status, Some(307));
    assert!(failure.to_string().contains("not followed"), "{failure}");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].0.as_str(), rows[0].1), ("http_error", Some(307)));
    assert_eq!(origin.received_requests().await.unwrap().len(), 1);
    assert!(
        elsewhere.received_requests().await.unwrap().is_empty(),
        "the card was re-sent to the redirect's target"
    );
}

#[tokio::test]
async fn a_truncated_key_quoted_by_the_provider_is_masked() {
    let server = MockServer::start().await;
    let quoted = format!(
        "Incorrect API key provided: {}****{}. See your account.",
        &KEY[..12],
        &KEY[KEY.len() - 9..]
    );
    answer_error(&server, 401, quoted).await;
    let keyed = DecomposerSettings {
        api_key: Some(ApiKey::new(KEY)),
        ..settings(&server.uri())
    };

    let (failure, rows) = failed_call(&keyed).await;

    let text = failure.to_string();
    assert!(text.contains("Incorrect API key provided"), "{text}");
    assert!(!leaks(&text, KEY), "{text}");
    assert_eq!(rows.len(), 1);
    assert!(!leaks(&rows[0].2, KEY), "{rows:?}");
}

#[tokio::test]
async fn base_url_credentials_never_appear_in_errors_or_the_ledger() {
    let server = MockServer::start().await;
    let base = server
        .uri()
        .replace("http://", "http://alice-user:pa55word-secret@");
    let base = format!("{base}/v1?api_key=query-secret-value");
    answer_error(&server, 400, format!("bad request to {base} for alice-user")).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let unreachable =
        format!("http://alice-user:pa55word-secret@127.0.0.1:{closed}/v1?api_key=query-secret-value");

    for base in [base.as_str(), unreachable.as_str()] {
        let settings = settings(base);
        let (failure, rows) = failed_call(&settings).await;
        let client = HttpModel::new(&settings).unwrap();
        let shown = format!("{failure} {rows:?} {client:?} {} {settings:?}", client.url());
        for secret in ["alice-user", "pa55word-secret", "query-secret-value"] {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
        assert!(shown.contains("[redacted]"), "{shown}");
    }
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].url.path(), "/v1/chat/completions");
    assert_eq!(requests[0].url.query(), Some("api_key=query-secret-value"));
}

#[test]
fn plain_http_to_another_machine_is_refused_unless_allowed() {
    let refused = HttpModel::new(&settings("http://api.example.com/v1")).unwrap_err();
    assert!(
        refused.to_string().contains("model.allow_insecure_http"),
        "{refused}"
    );
    let allowed = DecomposerSettings {
        allow_insecure_http: true,
        ..settings("http://api.example.com/v1")
    };
    assert!(HttpModel::new(&allowed).is_ok());
    for local in [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8080/v1",
        "http://[::1]:8080/v1",
        "https://api.example.com/v1",
    ] {
        assert!(HttpModel::new(&settings(local)).is_ok(), "{local}");
    }
    let credentialed = HttpModel::new(&settings("http://bob:hunter2-pass@example.com/v1")).unwrap_err();
    assert!(!credentialed.to_string().contains("hunter2"), "{credentialed}");
}

#[tokio::test]
async fn a_credential_split_by_the_message_cut_is_still_masked() {
    let server = MockServer::start().await;
    let base = server
        .uri()
        .replace("http://", "http://alice-user:pa55word-secret@");
    // The cut at 120 characters falls seven characters into the user name.
    let message = format!("{} {base}/v1/chat/completions", "x".repeat(105));
    answer_error(&server, 400, message).await;

    let (failure, rows) = failed_call(&settings(&format!("{base}/v1"))).await;

    let shown = format!("{failure} {rows:?}");
    assert!(!shown.contains("alice-u"), "{shown}");
    assert!(!leaks(&shown, "pa55word-secret"), "{shown}");
}
