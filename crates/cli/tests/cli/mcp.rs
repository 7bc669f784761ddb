//! `kanban mcp` and `/mcp` on `kanban serve`, driven by MCP clients we did not write: the
//! official Python SDK (the scripts beside this file, run with `target/venv`, which
//! `cargo xtask venv` makes) and the official Rust SDK's client (`rmcp`).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use board_core::{BoardReads, Outcome, Status};
use common::{get, store, task_id, venv_python, Board, KANBAN};
use fake_llm::{FakeLlm, Reply, Settings};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli/mcp")
        .join(name)
}

/// Runs a client script to its end; its stderr says what failed.
fn run_python(args: &[&std::ffi::OsStr]) {
    let out = Command::new(venv_python())
        .args(args)
        .env_remove("KANBAN_HOME")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "the client failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_python_sdk_lists_the_tools_and_calls_every_one() {
    let board = Board::init();
    let llm = FakeLlm::start_blocking(Settings::default()).expect("fake llm");
    let reply = json!({ "fanout": false, "title": "a sharper idea", "body": "done when it is sharp" });
    llm.push_reply(Reply::text(reply.to_string()));
    let config = format!(
        "model:\n  base_url: {}\n  default: fake-model\n  api_key_env: KANBAN_TEST_NO_KEY\n\
         kanban:\n  auto_decompose: false\n  max_text_bytes: 65536\n",
        llm.base_url()
    );
    std::fs::write(board.home().join("config.yaml"), config).expect("config");
    run_python(&[
        script("tour.py").as_os_str(),
        KANBAN.as_ref(),
        board.home().as_os_str(),
    ]);
    assert_eq!(llm.requests().len(), 1, "decompose_task made one model call");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `kanban mcp` on the board through rmcp's client, inside a worker when `worker` is given.
async fn connect(board: &Board, worker: Option<(&str, &str)>) -> RunningService<RoleClient, ()> {
    connect_with(board, worker, &[]).await
}

/// [`connect`] with `global` flags before the verb (`--board ops`).
async fn connect_with(
    board: &Board,
    worker: Option<(&str, &str)>,
    global: &[&str],
) -> RunningService<RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(KANBAN);
    cmd.arg("--home")
        .arg(board.home())
        .args(global)
        .arg("mcp")
        .env_remove("KANBAN_BOARD")
        .env_remove("KANBAN_HOME")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID");
    if let Some((task, run)) = worker {
        cmd.env("KANBAN_TASK", task).env("KANBAN_RUN_ID", run);
    }
    let transport = TokioChildProcess::new(cmd).expect("spawn kanban mcp");
    ().serve(transport).await.expect("initialize")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The text of a result's one content block, and whether it is an error.
fn text(result: &CallToolResult) -> (bool, String) {
    assert_eq!(result.content.len(), 1, "{result:?}");
    let text = result.content[0].as_text().expect("text content").text.clone();
    (result.is_error == Some(true), text)
}

fn answer(result: &CallToolResult) -> Value {
    let (error, text) = text(result);
    assert!(!error, "refused: {text}");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn the_rust_sdk_lists_the_tools_and_calls_them() {
    let board = Board::init();
    runtime().block_on(async {
        let client = connect(&board, None).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("kanban"));
        let tools = client.list_all_tools().await.expect("tools");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "list_tasks",
                "show_task",
                "task_context",
                "create_task",
                "comment",
                "heartbeat",
                "complete_task",
                "block_task",
                "request_review",
                "approve",
                "request_changes",
                "decompose_task",
                "link_tasks"
            ]
        );
        let task = answer(
            &call(
                &client,
                "create_task",
                json!({"title": "from rust", "priority": 2}),
            )
            .await,
        );
        let id = task["id"].as_str().expect("id").to_owned();
        let mut task = task;
        let outcome = task.as_object_mut().and_then(|t| t.remove("outcome"));
        assert_eq!(
            outcome,
            Some(json!("created")),
            "create_task says `created` as create --json does"
        );
        assert_eq!(task, board.json(&["show", &id])["task"]);
        let listed = answer(&call(&client, "list_tasks", json!({"status": "ready"})).await);
        assert_eq!(listed, board.json(&["list", "--status", "ready"]));
        // A page at a time: `limit` and `after` as `list --limit --after`; never unbounded.
        answer(&call(&client, "create_task", json!({"title": "second"})).await);
        // The CLI says on stderr where the next page starts; its stdout is the same list.
        let listed_page = |args: &[&str]| -> Value {
            let out = board.kanban(args).arg("--json").output().expect("run kanban");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice(&out.stdout).expect("JSON")
        };
        let page = answer(&call(&client, "list_tasks", json!({"limit": 1})).await);
        assert_eq!(page, listed_page(&["list", "--limit", "1"]));
        let first_id = page[0]["id"].as_str().expect("id").to_owned();
        let next = answer(&call(&client, "list_tasks", json!({"limit": 1, "after": first_id})).await);
        assert_eq!(next, listed_page(&["list", "--limit", "1", "--after", &first_id]));
        assert_ne!(page, next);
        let (error, message) = text(&call(&client, "list_tasks", json!({"limit": 5000})).await);
        assert!(error);
        assert_eq!(message, "limit: 5000 is out of range (1 to 1000)");
        let (error, message) =
            text(&call(&client, "comment", json!({"task_id": "t_00000000", "text": "x"})).await);
        assert!(error);
        assert_eq!(message, "no such task: t_00000000");
        let unknown = client
            .call_tool(CallToolRequestParams::new("no_such_tool"))
            .await
            .expect_err("an unknown tool is a protocol error");
        assert!(unknown.to_string().contains("no_such_tool"), "{unknown}");
        let done = answer(&call(&client, "complete_task", json!({"task_id": id, "result": "ok"})).await);
        assert_eq!(done, json!({"task_id": id, "ok": true}));
        client.cancel().await.expect("close");
    });
    let done = board.json(&["list", "--status", "done"]);
    assert_eq!(done[0]["result"], "ok", "{done}");
}

#[test]
fn kanban_mcp_serves_the_board_it_is_given() {
    let board = Board::init();
    board.ok(&["boards", "create", "ops"]);
    board.create(&["on default"]);
    board.create(&["--board", "ops", "on ops"]);
    runtime().block_on(async {
        let client = connect_with(&board, None, &["--board", "ops"]).await;
        let titles = |listed: Value| -> Vec<String> {
            let tasks = listed.as_array().cloned().unwrap_or_default();
            tasks
                .iter()
                .map(|t| t["title"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let listed = answer(&call(&client, "list_tasks", json!({})).await);
        assert_eq!(titles(listed), ["on ops"]);
        answer(&call(&client, "create_task", json!({"title": "made over mcp"})).await);
        client.cancel().await.expect("close");
    });
    let on_ops = board.json(&["--board", "ops", "list"]);
    assert_eq!(on_ops.as_array().map(Vec::len), Some(2), "{on_ops}");
    assert_eq!(board.json(&["list"]).as_array().map(Vec::len), Some(1));
}

#[test]
fn a_stale_workers_server_is_refused_and_the_current_runs_wins() {
    let board = Board::init();
    let id = board.create(&["contested"]);
    let old = board.ok(&["claim", &id]).trim().to_owned();
    board.ok(&["reclaim", &id]);
    let new = board.ok(&["claim", &id]).trim().to_owned();
    let before = board.snapshot();
    // The CLI's own refusal of the stale run, for the message the tool must carry.
    let cli = board
        .kanban(&["complete", "--result", "old"])
        .env("KANBAN_TASK", &id)
        .env("KANBAN_RUN_ID", &old)
        .output()
        .expect("run");
    assert_eq!(cli.status.code(), Some(1));
    let cli_message = String::from_utf8_lossy(&cli.stderr)
        .trim()
        .trim_start_matches("kanban: ")
        .to_owned();
    assert_eq!(
        board.snapshot(),
        before,
        "the CLI's stale complete changed nothing"
    );

    runtime().block_on(async {
        let stale = connect(&board, Some((&id, &old))).await;
        let current = connect(&board, Some((&id, &new))).await;
        for (tool, args) in [
            ("heartbeat", json!({})),
            ("block_task", json!({"reason": "stale", "kind": "transient"})),
        ] {
            let (error, message) = text(&call(&stale, tool, args).await);
            assert!(error, "{tool}: {message}");
            assert!(
                message.contains(&format!("run {old} is not the current run")),
                "{tool}: {message}"
            );
        }
        assert_eq!(board.snapshot(), before, "the stale worker changed nothing");
        // Both finish at once; only the current run can win.
        let (lost, won) = tokio::join!(
            call(&stale, "complete_task", json!({"result": "old"})),
            call(
                &current,
                "complete_task",
                json!({"result": "new", "summary": "mine"})
            ),
        );
        let (error, message) = text(&lost);
        assert!(error, "{message}");
        assert!(
            message == cli_message
                || message.starts_with(&format!(
                    "complete of {id} lost: run {old} is not the current run"
                )),
            "{message} vs the CLI's {cli_message}"
        );
        assert_eq!(answer(&won), json!({"task_id": id, "ok": true}));
        stale.cancel().await.expect("close");
        current.cancel().await.expect("close");
    });
    let task = get(&board, &id);
    assert_eq!(task.status, Status::Done);
    assert_eq!(task.result.as_deref(), Some("new"));
    let runs = store(&board).runs(&task_id(&id)).expect("runs");
    let completed: Vec<_> = runs
        .iter()
        .filter(|r| r.outcome == Some(Outcome::Completed))
        .collect();
    assert_eq!(completed.len(), 1, "{runs:?}");
    assert_eq!(completed[0].id.to_string(), new);
    let events = board.json(&["events", &id]);
    let completions = events
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "completed")
        .count();
    assert_eq!(completions, 1, "{events}");
}

/// One JSON-RPC message per line, to and from a raw `kanban mcp`.
struct Raw {
    child: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Raw {
    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .expect("write");
    }

    fn receive(&mut self) -> Value {
        let line = self
            .lines
            .next()
            .expect("a reply before the server ended")
            .expect("read");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }
}

#[test]
fn malformed_json_rpc_gets_a_protocol_error_and_the_server_goes_on() {
    let board = Board::init();
    let mut child = Command::new(KANBAN)
        .arg("--home")
        .arg(board.home())
        .arg("mcp")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut raw = Raw {
        child,
        lines: BufReader::new(stdout).lines(),
    };
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
    assert_eq!(raw.receive()["id"], 1);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    // Bytes that are not JSON at all: Parse error, with no id to answer.
    raw.send("this is not JSON {");
    let reply = raw.receive();
    assert_eq!(
        (reply["id"].clone(), reply["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{reply}"
    );
    // JSON that is not a JSON-RPC message: Invalid Request.
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":17}"#);
    let reply = raw.receive();
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    // A method nobody offers: Method not found.
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tasks/drop_all","params":{}}"#);
    let reply = raw.receive();
    assert_eq!(
        (reply["id"].clone(), reply["error"]["code"].clone()),
        (json!(3), json!(-32601)),
        "{reply}"
    );
    // A tool call that names no tool is no call the server knows.
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}"#);
    let reply = raw.receive();
    assert_eq!(reply["id"], 4, "{reply}");
    assert!(reply["error"]["code"].as_i64().is_some_and(|c| c < 0), "{reply}");
    // A tool call whose arguments are not an object: Invalid params.
    raw.send(
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"list_tasks","arguments":[1]}}"#,
    );
    let reply = raw.receive();
    assert_eq!(reply["id"], 6, "{reply}");
    assert!(reply["error"]["code"].as_i64().is_some_and(|c| c < 0), "{reply}");
    // And the server still answers.
    raw.send(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_tasks","arguments":{}}}"#,
    );
    let reply = raw.receive();
    assert_eq!(reply["id"], 5, "{reply}");
    assert_eq!(reply["result"]["content"][0]["text"], "[]", "{reply}");
    drop(raw.child.stdin.take());
    let status = raw.child.wait().expect("wait");
    assert!(
        status.success(),
        "kanban mcp ends when its client closes stdin: {status}"
    );
}

#[test]
fn a_gateway_worker_completes_its_task_through_kanban_mcp() {
    let board = Board::init();
    let worker = serde_json::to_string(&[
        venv_python().display().to_string(),
        script("worker.py").display().to_string(),
        KANBAN.to_owned(),
    ])
    .expect("argv");
    let config = format!("kanban:\n  auto_decompose: false\nprofiles:\n  agent:\n    command: {worker}\n");
    std::fs::write(board.home().join("config.yaml"), config).expect("config");
    let id = board.create(&["summarise the logs", "--assignee", "agent"]);
    board.ok(&["dispatch"]);
    let log =
        || std::fs::read_to_string(board.home().join("logs").join(format!("{id}.log"))).unwrap_or_default();
    let pid = get(&board, &id)
        .lease
        .and_then(|l| l.worker_pid)
        .expect("a spawned worker");
    // One dispatcher pass spawns the worker and nothing watches it after: wait until the
    // task leaves running, or its worker is gone without leaving it.
    let start = Instant::now();
    while get(&board, &id).status == Status::Running {
        let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
        assert!(
            !gone || get(&board, &id).status != Status::Running,
            "the worker ended without finishing:\n{}",
            log()
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never finished:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let task = get(&board, &id);
    let log = log();
    assert_eq!(task.status, Status::Done, "worker log:\n{log}");
    assert_eq!(task.result.as_deref(), Some("done: summarise the logs"));
    let shown = board.json(&["show", &id]);
    assert_eq!(shown["comments"][0]["body"], "working on summarise the logs");
    assert_eq!(shown["runs"].as_array().expect("runs").len(), 1);
    assert_eq!(shown["runs"][0]["outcome"], "completed");
    assert_eq!(shown["runs"][0]["summary"], "through MCP");
    let kinds: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"heartbeat"), "{kinds:?}");
}

#[test]
fn serve_offers_the_tools_at_mcp_behind_its_token() {
    let board = Board::init();
    let (mut serve, addr) = board.serve(&["--token", "s3cret-token-5b1e0c"]);
    let url = format!("http://{addr}/mcp");
    let outcome = std::panic::catch_unwind(|| {
        run_python(&[
            script("serve_http.py").as_os_str(),
            url.as_ref(),
            "s3cret-token-5b1e0c".as_ref(),
        ]);
    });
    serve.kill().expect("stop serve");
    serve.wait().expect("reap serve");
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    assert_eq!(board.json(&["list", "--status", "done"])[0]["result"], "served");
}

#[test]
fn a_person_reviews_through_the_review_tools() {
    let board = Board::init();
    let id = board.create(&["reviewed by a person"]);
    board.ok(&["request-review", &id, "--summary", "please look"]);
    runtime().block_on(async {
        let client = connect(&board, None).await;
        let sent_back = call(
            &client,
            "request_changes",
            json!({"task_id": id, "reason": "name the error path"}),
        )
        .await;
        assert_eq!(answer(&sent_back), json!({"task_id": id, "ok": true}));
        let task = board.json(&["show", &id]);
        assert_eq!(task["task"]["status"], "ready");
        assert_eq!(
            task["comments"][0]["body"],
            "CHANGES REQUESTED: name the error path"
        );
        assert!(
            task["comments"][0]["author"].is_string(),
            "a person's requested changes are signed by the caller: {task}"
        );
        let (error, message) = text(&call(&client, "approve", json!({"task_id": id})).await);
        assert!(error && message.contains("approve needs review"), "{message}");
        board.ok(&["request-review", &id]);
        let approved = call(&client, "approve", json!({"task_id": id, "summary": "good"})).await;
        assert_eq!(answer(&approved), json!({"task_id": id, "ok": true}));
        assert_eq!(board.json(&["show", &id])["task"]["status"], "done");
        client.cancel().await.expect("close");
    });
}
