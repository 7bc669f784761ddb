//! Which reply a request gets: per-task replies, the ordered script, the responder
//! function, the default, their precedence, and the reply hook. Also the blocking
//! constructor, which synchronous callers use.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{chat, reply_content};
use fake_llm::{FakeLlm, Reply, Script, Settings};
use serde_json::{json, Value};

async fn start() -> FakeLlm {
    FakeLlm::start(Settings::default()).await.expect("start")
}

/// A body like the decomposer's: the user message starts with `Task id: <id>`.
fn card(task_id: &str) -> Value {
    chat(&format!("Task id: {task_id}\nTitle: something\nBody:\n(no body)"))
}

#[tokio::test]
async fn task_ids_select_their_own_replies_and_the_last_one_repeats() {
    let llm = start().await;
    llm.script_task("t_aaaa0001", vec![Reply::text("a1"), Reply::text("a2")]);
    llm.script_task("t_bbbb0002", vec![Reply::text("b")]);
    let url = llm.base_url();

    assert_eq!(reply_content(&url, &card("t_bbbb0002")).await, "b");
    assert_eq!(reply_content(&url, &card("t_aaaa0001")).await, "a1");
    assert_eq!(reply_content(&url, &card("t_aaaa0001")).await, "a2");
    assert_eq!(reply_content(&url, &card("t_aaaa0001")).await, "a2");
    assert_eq!(reply_content(&url, &card("t_bbbb0002")).await, "b");

    let task_ids: Vec<Option<String>> = llm.requests().into_iter().map(|r| r.task_id).collect();
    assert_eq!(
        task_ids,
        [
            "t_bbbb0002",
            "t_aaaa0001",
            "t_aaaa0001",
            "t_aaaa0001",
            "t_bbbb0002"
        ]
        .map(|id| Some(id.to_owned()))
    );
}

#[tokio::test]
async fn the_task_id_is_found_in_any_message_and_in_content_parts() {
    let llm = start().await;
    llm.script_task("t_0123abcd", vec![Reply::text("found")]);
    let body = json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "no id here, not even Task id: t_ alone"},
            {"role": "user", "content": [
                {"type": "text", "text": "Please look at Task id: t_0123abcd, thanks"}
            ]},
        ],
    });
    assert_eq!(reply_content(&llm.base_url(), &body).await, "found");
    assert_eq!(llm.requests()[0].task_id.as_deref(), Some("t_0123abcd"));
}

#[tokio::test]
async fn precedence_is_task_then_queue_then_responder_then_default() {
    let llm = start().await;
    llm.set_default_reply(Reply::text("default"));
    llm.script_task("t_00000001", vec![Reply::text("task")]);
    llm.push_reply(Reply::text("queued"));
    llm.respond_with(|_| Reply::text("responder"));
    let url = llm.base_url();

    // A task with replies wins even while the queue is not empty.
    assert_eq!(reply_content(&url, &card("t_00000001")).await, "task");
    // A task without replies falls through to the queue.
    assert_eq!(reply_content(&url, &card("t_0000ffff")).await, "queued");
    // The queue is used up: the responder answers.
    assert_eq!(reply_content(&url, &chat("no task")).await, "responder");
    assert_eq!(reply_content(&url, &chat("no task")).await, "responder");

    // Without a responder, the default answers once the queue is empty.
    let plain = start().await;
    plain.set_default_reply(Reply::text("default"));
    plain.push_reply(Reply::text("queued"));
    assert_eq!(reply_content(&plain.base_url(), &chat("x")).await, "queued");
    assert_eq!(reply_content(&plain.base_url(), &chat("x")).await, "default");
}

#[tokio::test]
async fn ordered_replies_are_used_once_each_then_the_default() {
    let llm = FakeLlm::start(Settings {
        script: Script {
            default: Reply::text("fallback"),
            replies: vec![Reply::text("one"), Reply::text("two")],
            tasks: BTreeMap::new(),
        },
        ..Settings::default()
    })
    .await
    .expect("start");
    let url = llm.base_url();
    for expected in ["one", "two", "fallback", "fallback"] {
        assert_eq!(reply_content(&url, &chat("x")).await, expected);
    }
}

#[tokio::test]
async fn the_unscripted_default_says_so() {
    let llm = start().await;
    assert_eq!(
        reply_content(&llm.base_url(), &chat("x")).await,
        fake_llm::script::UNSCRIPTED_TEXT
    );
}

#[tokio::test]
async fn a_responder_function_sees_the_request() {
    let llm = start().await;
    llm.respond_with(|request| {
        let last = request
            .json()
            .and_then(|body| body["messages"].as_array()?.last()?["content"].as_str())
            .unwrap_or("?")
            .to_owned();
        if last == "fail" {
            Reply::error(500, "asked to fail")
        } else {
            Reply::text(format!("echo: {last}"))
        }
    });
    let url = llm.base_url();
    assert_eq!(reply_content(&url, &chat("ping")).await, "echo: ping");
    assert_eq!(common::post(&url, &chat("fail")).await.status(), 500);
}

#[tokio::test]
async fn a_panicking_responder_is_answered_with_500() {
    let llm = start().await;
    llm.respond_with(|_| panic!("responder bug"));
    assert_eq!(common::post(&llm.base_url(), &chat("x")).await.status(), 500);
    // The server still answers afterwards.
    llm.push_reply(Reply::text("fine"));
    assert_eq!(reply_content(&llm.base_url(), &chat("x")).await, "fine");
}

#[tokio::test]
async fn the_hook_runs_after_recording_and_before_the_reply() {
    let llm = start().await;
    // Stands in for a database the test changes while "the model is thinking".
    let board = Arc::new(Mutex::new(String::from("untouched")));
    let hook_board = Arc::clone(&board);
    llm.on_request(move |request| {
        let mut state = hook_board.lock().expect("lock");
        *state = format!("changed during request {}", request.seq);
    });
    let responder_board = Arc::clone(&board);
    llm.respond_with(move |_| Reply::text(responder_board.lock().expect("lock").clone()));

    let url = llm.base_url();
    assert_eq!(reply_content(&url, &chat("x")).await, "changed during request 0");
    assert_eq!(reply_content(&url, &chat("x")).await, "changed during request 1");
}

/// A plain `#[test]`: the server runs on its own thread, so it keeps answering while
/// this thread drives a client on a runtime of its own.
#[test]
fn the_blocking_constructor_serves_synchronous_callers_and_closes_on_drop() {
    let llm = FakeLlm::start_blocking(Settings::default()).expect("start");
    llm.push_reply(Reply::text("from a thread"));
    let addr = llm.addr();
    assert!(addr.ip().is_loopback());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let content = runtime.block_on(reply_content(&llm.base_url(), &chat("x")));
    assert_eq!(content, "from a thread");
    assert_eq!(llm.requests().len(), 1);

    drop(llm);
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "the port is closed once drop returns"
    );
}
