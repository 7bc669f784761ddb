//! What every test file shares: a real HTTP client and request bodies shaped like the
//! board's own calls.

#![allow(dead_code)] // each test file uses its own subset

use std::time::Duration;

use serde_json::{json, Value};

/// A plain-HTTP client that ignores proxy variables, so requests stay on 127.0.0.1.
pub fn client() -> reqwest::Client {
    client_with_timeout(Duration::from_secs(10))
}

pub fn client_with_timeout(timeout: Duration) -> reqwest::Client {
    match reqwest::Client::builder().no_proxy().timeout(timeout).build() {
        Ok(client) => client,
        Err(err) => panic!("cannot build the HTTP client: {err}"),
    }
}

/// A non-streaming chat body with one user message, like the decomposer's (no tools).
pub fn chat(content: &str) -> Value {
    json!({
        "model": "test-model",
        "temperature": 0.3,
        "messages": [
            {"role": "system", "content": "You split cards."},
            {"role": "user", "content": content},
        ],
    })
}

/// The same body asking for a stream.
pub fn streaming_chat(content: &str) -> Value {
    let mut body = chat(content);
    body["stream"] = Value::Bool(true);
    body
}

pub fn completions_url(base_url: &str) -> String {
    format!("{base_url}/chat/completions")
}

/// POSTs a chat body and returns the response.
pub async fn post(base_url: &str, body: &Value) -> reqwest::Response {
    match client().post(completions_url(base_url)).json(body).send().await {
        Ok(response) => response,
        Err(err) => panic!("request failed: {err}"),
    }
}

/// POSTs a chat body and returns `choices[0].message.content` of a 200 reply.
pub async fn reply_content(base_url: &str, body: &Value) -> String {
    let response = post(base_url, body).await;
    assert_eq!(response.status(), 200);
    let reply: Value = match response.json().await {
        Ok(reply) => reply,
        Err(err) => panic!("reply is not JSON: {err}"),
    };
    match reply["choices"][0]["message"]["content"].as_str() {
        Some(content) => content.to_owned(),
        None => panic!("no content in {reply}"),
    }
}

/// The `data:` payloads of an SSE body, in order.
pub fn sse_data(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

/// The content pieces of the content-bearing chunks among SSE payloads.
pub fn content_pieces(data: &[String]) -> Vec<String> {
    data.iter()
        .filter_map(|payload| serde_json::from_str::<Value>(payload).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}
