//! Each reply kind, seen through a real HTTP client: text (JSON and SSE), errors, raw
//! bodies, hangs, delays, and streams that stall or drop.

mod common;

use std::time::{Duration, Instant};

use common::{
    chat, client, client_with_timeout, completions_url, content_pieces, post, reply_content, sse_data,
    streaming_chat,
};
use fake_llm::{FakeLlm, Reply, Settings, Usage};
use serde_json::Value;

async fn start() -> FakeLlm {
    FakeLlm::start(Settings::default()).await.expect("start")
}

async fn start_chunked(chunk_chars: usize, chunk_delay: Duration) -> FakeLlm {
    FakeLlm::start(Settings {
        chunk_chars,
        chunk_delay,
        ..Settings::default()
    })
    .await
    .expect("start")
}

#[tokio::test]
async fn text_reply_is_a_chat_completion_with_usage() {
    let llm = start().await;
    llm.push_reply(Reply::text("hello there"));

    let response = post(&llm.base_url(), &chat("12345678")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "JSON replies say so"
    );
    let reply: Value = response.json().await.expect("json");
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["model"], "test-model");
    assert_eq!(reply["choices"][0]["message"]["role"], "assistant");
    assert_eq!(reply["choices"][0]["message"]["content"], "hello there");
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    // Estimated at one token per 4 characters: system (16 chars) 4 + user (8) 2.
    assert_eq!(reply["usage"]["prompt_tokens"], 6);
    assert_eq!(reply["usage"]["completion_tokens"], 3);
    assert_eq!(reply["usage"]["total_tokens"], 9);
}

#[tokio::test]
async fn text_reply_reports_scripted_usage() {
    let llm = start().await;
    llm.push_reply(Reply::Text {
        content: "x".into(),
        usage: Some(Usage {
            prompt_tokens: 1000,
            completion_tokens: 250,
        }),
    });
    let reply: Value = post(&llm.base_url(), &chat("hi"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(reply["usage"]["prompt_tokens"], 1000);
    assert_eq!(reply["usage"]["completion_tokens"], 250);
    assert_eq!(reply["usage"]["total_tokens"], 1250);
}

#[tokio::test]
async fn streamed_text_comes_in_chunks_of_the_set_size_and_ends_with_done() {
    let llm = start_chunked(4, Duration::ZERO).await;
    let content = "héllo wörld, ünïcode"; // 20 characters, multi-byte ones included
    llm.push_reply(Reply::text(content));

    let response = post(&llm.base_url(), &streaming_chat("go")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.expect("body");
    let data = sse_data(&text);
    let pieces = content_pieces(&data);

    assert_eq!(pieces.len(), 5, "20 characters in chunks of 4: {pieces:?}");
    assert!(pieces.iter().all(|piece| piece.chars().count() == 4));
    assert_eq!(pieces.concat(), content);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let finish: Value = serde_json::from_str(&data[data.len() - 2]).expect("finish chunk");
    assert_eq!(finish["object"], "chat.completion.chunk");
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let first: Value = serde_json::from_str(&data[0]).expect("first chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
}

#[tokio::test]
async fn streamed_text_sends_usage_when_asked() {
    let llm = start_chunked(100, Duration::ZERO).await;
    llm.push_reply(Reply::text("abcdefgh"));
    let mut body = streaming_chat("go");
    body["stream_options"] = serde_json::json!({"include_usage": true});

    let text = post(&llm.base_url(), &body).await.text().await.expect("body");
    let data = sse_data(&text);
    let usage: Value = serde_json::from_str(&data[data.len() - 2]).expect("usage chunk");
    assert_eq!(usage["choices"], serde_json::json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 2);
}

#[tokio::test]
async fn streamed_chunks_are_spaced_by_the_chunk_delay() {
    let delay = Duration::from_millis(40);
    let llm = start_chunked(2, delay).await;
    llm.push_reply(Reply::text("abcdefgh")); // 4 chunks

    let started = Instant::now();
    let mut response = post(&llm.base_url(), &streaming_chat("go")).await;
    let mut received = String::new();
    let mut first_content_at = None;
    while let Some(bytes) = response.chunk().await.expect("chunk") {
        received.push_str(std::str::from_utf8(&bytes).expect("utf-8"));
        if first_content_at.is_none() && received.contains("\"content\"") {
            first_content_at = Some(started.elapsed());
        }
    }
    let total = started.elapsed();

    assert_eq!(content_pieces(&sse_data(&received)).concat(), "abcdefgh");
    assert!(total >= delay * 4, "4 chunks of 40 ms took {total:?}");
    let first = first_content_at.expect("content arrived");
    assert!(
        first + delay * 2 <= total,
        "chunks are sent as they are made (first at {first:?}, end at {total:?})"
    );
}

#[tokio::test]
async fn error_reply_has_status_openai_body_and_retry_after() {
    let llm = start().await;
    llm.push_reply(Reply::Error {
        status: 429,
        message: "slow down".into(),
        retry_after: Some(7),
    });
    llm.push_reply(Reply::error(500, "boom"));

    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["message"], "slow down");
    assert_eq!(body["error"]["type"], "requests");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(response.status(), 500);
    assert!(response.headers().get("retry-after").is_none());
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["message"], "boom");
    assert_eq!(body["error"]["type"], "server_error");
}

#[tokio::test]
async fn an_invalid_scripted_status_is_answered_with_500() {
    let llm = start().await;
    llm.push_reply(Reply::error(1000, "nope"));
    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.expect("json");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|message| message.contains("1000")));
}

#[tokio::test]
async fn raw_reply_bytes_come_back_exactly_even_invalid_utf8() {
    let llm = start().await;
    let bytes: &[u8] = &[b'{', 0xff, 0xfe, b'"', 0x80, 0xc3, b'}'];
    llm.push_reply(Reply::Raw {
        status: 202,
        content_type: "application/octet-stream".into(),
        body: bytes.to_vec().into(),
    });

    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(response.status(), 202);
    assert_eq!(response.headers()["content-type"], "application/octet-stream");
    assert_eq!(response.bytes().await.expect("body").as_ref(), bytes);
}

#[tokio::test]
async fn raw_reply_can_be_ten_mebibytes() {
    let llm = start().await;
    let big: Vec<u8> = (0..10 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    llm.push_reply(Reply::raw("application/json", big.clone()));

    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(
        response.headers()["content-length"],
        (10 * 1024 * 1024).to_string().as_str()
    );
    let received = response.bytes().await.expect("body");
    assert_eq!(received.len(), big.len());
    assert!(received.as_ref() == big.as_slice());
}

#[tokio::test]
async fn a_hanging_request_times_out_while_another_is_answered() {
    let llm = start().await;
    llm.push_reply(Reply::Hang);
    llm.set_default_reply(Reply::text("still here"));
    let base_url = llm.base_url();

    let hanging = tokio::spawn({
        let base_url = base_url.clone();
        async move {
            client_with_timeout(Duration::from_millis(300))
                .post(completions_url(&base_url))
                .json(&chat("first"))
                .send()
                .await
        }
    });
    // Once the first request is recorded it has taken the hang; the next gets the default.
    llm.wait_for_requests(1).await;
    assert_eq!(reply_content(&base_url, &chat("second")).await, "still here");

    let outcome = hanging.await.expect("task");
    let err = outcome.expect_err("a hanging request never gets an answer");
    assert!(err.is_timeout(), "{err}");
}

#[tokio::test]
async fn a_hanging_request_is_cut_when_the_server_shuts_down() {
    let llm = start().await;
    llm.push_reply(Reply::Hang);
    let base_url = llm.base_url();
    let hanging = tokio::spawn(async move {
        client()
            .post(completions_url(&base_url))
            .json(&chat("wait"))
            .send()
            .await
    });
    llm.wait_for_requests(1).await;
    drop(llm);

    let err = hanging
        .await
        .expect("task")
        .expect_err("no answer, the connection closes");
    assert!(
        !err.is_timeout(),
        "released by shutdown, not by the client's timeout: {err}"
    );
}

#[tokio::test]
async fn delayed_reply_waits_then_answers() {
    let llm = start().await;
    let delay = Duration::from_millis(150);
    llm.push_reply(Reply::delayed(delay, Reply::text("after a while")));

    let started = Instant::now();
    assert_eq!(reply_content(&llm.base_url(), &chat("hi")).await, "after a while");
    assert!(started.elapsed() >= delay);
}

#[tokio::test]
async fn delay_composes_with_other_replies() {
    let llm = start().await;
    llm.push_reply(Reply::delayed(
        Duration::from_millis(20),
        Reply::delayed(Duration::from_millis(20), Reply::error(503, "later")),
    ));
    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(response.status(), 503);
}

#[tokio::test]
async fn a_stalled_stream_sends_some_chunks_then_nothing() {
    let llm = start_chunked(2, Duration::ZERO).await;
    llm.push_reply(Reply::Stall {
        content: "abcdefgh".into(),
        after_chunks: 2,
    });

    let mut response = post(&llm.base_url(), &streaming_chat("go")).await;
    assert_eq!(response.status(), 200);
    let mut received = String::new();
    while content_pieces(&sse_data(&received)).len() < 2 {
        let bytes = response.chunk().await.expect("chunk").expect("not the end");
        received.push_str(std::str::from_utf8(&bytes).expect("utf-8"));
    }
    assert_eq!(content_pieces(&sse_data(&received)).concat(), "abcd");

    let next = tokio::time::timeout(Duration::from_millis(200), response.chunk()).await;
    assert!(next.is_err(), "the stream stalls: {next:?}");
    assert!(!received.contains("[DONE]"));

    // At shutdown the stream is cut, never ended as if it were complete.
    drop(llm);
    assert!(response.chunk().await.is_err());
}

#[tokio::test]
async fn a_stalled_non_streaming_reply_sends_half_its_body_then_nothing() {
    let llm = start().await;
    llm.push_reply(Reply::Stall {
        content: "abcdefgh".into(),
        after_chunks: 0,
    });
    let response = client_with_timeout(Duration::from_millis(300))
        .post(completions_url(&llm.base_url()))
        .json(&chat("hi"))
        .send()
        .await
        .expect("headers arrive");
    assert_eq!(response.status(), 200);
    let err = response.bytes().await.expect_err("the body never completes");
    assert!(err.is_timeout(), "{err}");
}

#[tokio::test]
async fn a_dropped_stream_sends_some_chunks_then_closes_the_connection() {
    let llm = start_chunked(2, Duration::ZERO).await;
    llm.push_reply(Reply::Drop {
        content: "abcdefgh".into(),
        after_chunks: 3,
    });

    let mut response = post(&llm.base_url(), &streaming_chat("go")).await;
    assert_eq!(response.status(), 200);
    let mut received = String::new();
    let outcome = loop {
        match response.chunk().await {
            Ok(Some(bytes)) => received.push_str(std::str::from_utf8(&bytes).expect("utf-8")),
            Ok(None) => break Ok(()),
            Err(err) => break Err(err),
        }
    };
    assert!(outcome.is_err(), "the client sees a broken body");
    assert_eq!(content_pieces(&sse_data(&received)).concat(), "abcdef");
    assert!(!received.contains("[DONE]"));
}

#[tokio::test]
async fn a_dropped_non_streaming_reply_is_an_incomplete_body() {
    let llm = start().await;
    llm.push_reply(Reply::Drop {
        content: "abcdefgh".into(),
        after_chunks: 0,
    });
    let response = post(&llm.base_url(), &chat("hi")).await;
    assert_eq!(response.status(), 200);
    assert!(response.bytes().await.is_err());

    // The server itself is fine afterwards.
    llm.set_default_reply(Reply::text("next"));
    assert_eq!(reply_content(&llm.base_url(), &chat("hi")).await, "next");
}

#[tokio::test]
async fn models_are_listed() {
    let llm = start().await;
    let models: Value = client()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], fake_llm::MODEL_ID);
}
