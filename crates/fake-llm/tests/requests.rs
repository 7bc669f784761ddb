//! The request log (in-process and at `GET /_fake/requests`), the `main`/`aux`
//! classification, the API key check, and answers to requests that are wrong.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{chat, client, completions_url, post};
use fake_llm::{FakeLlm, RecordedBody, RecordedRequest, RequestKind, Settings};
use serde_json::{json, Value};

async fn start() -> FakeLlm {
    FakeLlm::start(Settings::default()).await.expect("start")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

#[tokio::test]
async fn every_request_is_recorded_and_classified_main_or_aux() {
    let llm = start().await;
    let url = llm.base_url();
    let before = now_ms();

    let aux = chat("Task id: t_00ab00cd\nTitle: split me");
    let mut main = chat("do the work");
    main["tools"] = json!([{"type": "function", "function": {"name": "shell"}}]);
    let mut empty_tools = chat("no tools really");
    empty_tools["tools"] = json!([]);

    client()
        .post(completions_url(&url))
        .header("x-run", "abc")
        .json(&aux)
        .send()
        .await
        .expect("send");
    post(&url, &main).await;
    post(&url, &empty_tools).await;
    client().get(format!("{url}/models")).send().await.expect("send");

    let log = llm.requests();
    let kinds: Vec<RequestKind> = log.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            RequestKind::Aux,
            RequestKind::Main,
            RequestKind::Aux,
            RequestKind::Aux
        ]
    );
    let seqs: Vec<u64> = log.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);

    let first = &log[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("X-Run"), Some("abc"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(first.json(), Some(&aux));
    assert_eq!(first.task_id.as_deref(), Some("t_00ab00cd"));
    assert!((before..=now_ms()).contains(&first.received_at_ms));

    let models = &log[3];
    assert_eq!(
        (models.method.as_str(), models.path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(models.body, RecordedBody::Text(String::new()));
    assert_eq!(models.task_id, None);
}

#[tokio::test]
async fn the_log_is_served_as_json_and_reading_it_is_not_recorded() {
    let llm = start().await;
    let url = llm.base_url();
    let mut main = chat("work");
    main["tools"] = json!([{"type": "function"}]);
    post(&url, &chat("Task id: t_12345678")).await;
    post(&url, &main).await;

    let served = client()
        .get(format!("http://{}/_fake/requests", llm.addr()))
        .send()
        .await
        .expect("send");
    assert_eq!(served.status(), 200);
    let served: Value = served.json().await.expect("json");
    let entries = served.as_array().expect("an array");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["kind"], "aux");
    assert_eq!(entries[0]["task_id"], "t_12345678");
    assert_eq!(
        entries[0]["body"]["json"]["messages"][1]["content"],
        "Task id: t_12345678"
    );
    assert_eq!(entries[1]["kind"], "main");
    assert_eq!(entries[1]["path"], "/v1/chat/completions");

    // The served log is the in-process log, field for field.
    let parsed: Vec<RecordedRequest> = serde_json::from_value(served.clone()).expect("typed");
    assert_eq!(parsed, llm.requests());
    assert_eq!(llm.requests().len(), 2, "reading the log is not a request");
}

#[tokio::test]
async fn waiting_for_requests_returns_once_they_arrive() {
    let llm = start().await;
    let url = llm.base_url();
    let sender = tokio::spawn(async move {
        post(&url, &chat("one")).await;
        post(&url, &chat("two")).await;
    });
    let log = llm.wait_for_requests(2).await;
    assert_eq!(log.len(), 2);
    sender.await.expect("sender");
}

#[tokio::test]
async fn with_an_api_key_requests_without_it_get_401() {
    let llm = FakeLlm::start(Settings {
        api_key: Some("sekret".into()),
        ..Settings::default()
    })
    .await
    .expect("start");
    let url = completions_url(&llm.base_url());

    let missing = client().post(&url).json(&chat("x")).send().await.expect("send");
    assert_eq!(missing.status(), 401);
    let body: Value = missing.json().await.expect("json");
    assert_eq!(body["error"]["code"], "invalid_api_key");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].is_string());

    let wrong = client()
        .post(&url)
        .bearer_auth("guess")
        .json(&chat("x"))
        .send()
        .await
        .expect("send");
    assert_eq!(wrong.status(), 401);

    let models = client()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .expect("send");
    assert_eq!(models.status(), 401);

    let right = client()
        .post(&url)
        .bearer_auth("sekret")
        .json(&chat("x"))
        .send()
        .await
        .expect("send");
    assert_eq!(right.status(), 200);

    // Refused requests are still recorded: the client did send them.
    assert_eq!(llm.requests().len(), 4);
    assert_eq!(llm.requests()[3].header("authorization"), Some("Bearer sekret"));
}

#[tokio::test]
async fn wrong_requests_get_openai_shaped_errors() {
    let llm = start().await;
    let url = llm.base_url();

    let malformed = client()
        .post(completions_url(&url))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_eq!(malformed.status(), 400);
    let body: Value = malformed.json().await.expect("json");
    assert!(body["error"]["message"].is_string());

    let no_messages = post(&url, &json!({"model": "m"})).await;
    assert_eq!(no_messages.status(), 400);

    let invalid_utf8 = client()
        .post(completions_url(&url))
        .body(vec![0xff, 0xfe, 0x00])
        .send()
        .await
        .expect("send");
    assert_eq!(invalid_utf8.status(), 400);

    let unknown = client()
        .get(format!("http://{}/nowhere", llm.addr()))
        .send()
        .await
        .expect("send");
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.expect("json");
    assert_eq!(body["error"]["code"], "not_found");

    let unknown_control = client()
        .get(format!("http://{}/_fake/nothing", llm.addr()))
        .send()
        .await
        .expect("send");
    assert_eq!(unknown_control.status(), 404);

    let wrong_method = client().get(completions_url(&url)).send().await.expect("send");
    assert_eq!(wrong_method.status(), 405);

    let log = llm.requests();
    assert_eq!(log[0].body, RecordedBody::Text("{not json".into()));
    assert_eq!(log[2].body, RecordedBody::Text("\u{fffd}\u{fffd}\u{0}".into()));
    assert_eq!(log.len(), 5, "everything but /_fake/ is recorded");

    // None of that hurt the server.
    assert_eq!(
        common::reply_content(&url, &chat("x")).await,
        fake_llm::script::UNSCRIPTED_TEXT
    );
}
