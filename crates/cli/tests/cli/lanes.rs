//! Lanes end to end (docs/lanes.md): agents outside the gateway claim, hold and report
//! work on the same board as the gateway's own workers, over the command line, over
//! HTTP (the stdlib Python example worker) and over MCP (the MCP Python SDK); a lane that goes quiet loses its task after
//! the lease; every lane endpoint refuses a wrong token and another lane's run; a
//! waiting claim wakes as soon as a task is ready.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use board_core::{BoardReads, LaneDesk, Status, TaskId};
use serde_json::Value;

use crate::common::{self, venv_python, Board};
use crate::gateway_board::{check_board, worker_profile, GatewayBoard, Setup};

/// One HTTP exchange: its status and body.
fn http(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn token_of(created: &str) -> String {
    let lane: Value = serde_json::from_str(created).expect("lane create --json");
    lane["token"].as_str().expect("a token").to_owned()
}

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/lane_worker.py")
}

#[test]
fn every_lane_endpoint_refuses_a_wrong_token_and_another_lanes_run_and_changes_nothing() {
    let board = Board::init();
    let mine = token_of(&board.ok(&["--json", "lane", "create", "mine", "--profile", "default"]));
    let other = token_of(&board.ok(&["--json", "lane", "create", "other", "--profile", "default"]));
    let gone = token_of(&board.ok(&["--json", "lane", "create", "gone", "--profile", "default"]));
    board.ok(&["lane", "revoke", "gone"]);
    let task = board.create(&["held", "--assignee", "default"]);
    let (mut server, addr) = board.serve(&[]);
    let (status, claimed) = http(&addr, "POST", "/api/lanes/claim", Some(&mine), "");
    assert_eq!(status, 200, "{claimed}");
    let claimed: Value = serde_json::from_str(&claimed).unwrap();
    assert_eq!(claimed["task_id"], task.as_str());
    let run = claimed["run_id"].as_i64().unwrap();
    let before = board.snapshot();
    let run_body = format!("{{\"run_id\": {run}}}");
    let mcp_complete = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"complete_task","arguments":{{"task_id":"{task}","run_id":{run}}}}}}}"#
    );
    let endpoints: Vec<(&str, String, String)> = vec![
        ("POST", "/api/lanes/claim?wait=1".into(), String::new()),
        ("POST", "/api/lanes/mcp".into(), mcp_complete.clone()),
        (
            "GET",
            format!("/api/lanes/tasks/{task}?run_id={run}"),
            String::new(),
        ),
        (
            "POST",
            format!("/api/lanes/tasks/{task}/heartbeat"),
            run_body.clone(),
        ),
        (
            "POST",
            format!("/api/lanes/tasks/{task}/comment"),
            format!("{{\"run_id\": {run}, \"body\": \"hi\"}}"),
        ),
        (
            "POST",
            format!("/api/lanes/tasks/{task}/complete"),
            run_body.clone(),
        ),
        ("POST", format!("/api/lanes/tasks/{task}/block"), run_body.clone()),
        (
            "POST",
            format!("/api/lanes/tasks/{task}/request-review"),
            run_body.clone(),
        ),
    ];
    let wrong = [
        None,
        Some("kl_0000000000000000000000000000000000000000000000000000000000000000"),
        Some(gone.as_str()),
        Some(common::SERVE_TOKEN),
    ];
    for (method, path, body) in &endpoints {
        for token in wrong {
            let (status, answer) = http(&addr, method, path, token, body);
            assert_eq!(status, 401, "{method} {path} with {token:?}: {answer}");
            assert!(answer.contains("\"error\""), "{answer}");
        }
        if path.starts_with("/api/lanes/tasks/") {
            let (status, answer) = http(&addr, method, path, Some(&other), body);
            assert_eq!(status, 403, "{method} {path} by another lane: {answer}");
        }
    }
    // Over MCP, another lane's report is the tool's error, and changes nothing.
    let (status, answer) = http(&addr, "POST", "/api/lanes/mcp", Some(&other), &mcp_complete);
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let message = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(message, format!("lane other does not hold run {run} of {task}"));
    assert_eq!(board.snapshot(), before, "no refused call changed the board");
    let (status, done) = http(
        &addr,
        "POST",
        &format!("/api/lanes/tasks/{task}/complete"),
        Some(&mine),
        &run_body,
    );
    assert_eq!(status, 200, "{done}");
    let (status, late) = http(
        &addr,
        "POST",
        &format!("/api/lanes/tasks/{task}/complete"),
        Some(&mine),
        &run_body,
    );
    assert_eq!(status, 403, "a run it no longer holds: {late}");
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn claims_beyond_lanes_max_waiting_are_answered_503_at_once() {
    let board = Board::init();
    board.ok(&["config", "set", "lanes.max_waiting", "1"]);
    let token = token_of(&board.ok(&["--json", "lane", "create", "first", "--profile", "default"]));
    let other = token_of(&board.ok(&["--json", "lane", "create", "second", "--profile", "default"]));
    let (mut server, addr) = board.serve(&[]);
    let (at, bearer) = (addr.clone(), token.clone());
    let waiting =
        std::thread::spawn(move || http(&at, "POST", "/api/lanes/claim?wait=30", Some(&bearer), ""));
    let store = common::store(&board);
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.lane("first").unwrap().unwrap().waiting_until.is_none() {
        assert!(Instant::now() < deadline, "the claim never waited");
        std::thread::yield_now();
    }
    let started = Instant::now();
    let (status, body) = http(&addr, "POST", "/api/lanes/claim?wait=30", Some(&other), "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("lanes.max_waiting"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "answered at once");
    let (status, body) = http(&addr, "POST", "/api/lanes/claim", Some(&other), "");
    assert_eq!(
        status, 204,
        "a claim that does not wait is still answered: {body}"
    );
    board.create(&["ready", "--assignee", "default"]);
    let (status, body) = waiting.join().unwrap();
    assert_eq!(status, 200, "the waiting claim got the task: {body}");
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn a_waiting_claim_wakes_within_50_ms_of_a_task_becoming_ready() {
    let board = Board::init();
    let token = token_of(&board.ok(&["--json", "lane", "create", "quick", "--profile", "default"]));
    let (mut server, addr) = board.serve(&[]);
    let mut latencies = Vec::new();
    for round in 0..5 {
        let (at, bearer) = (addr.clone(), token.clone());
        let waiting = std::thread::spawn(move || {
            let answer = http(&at, "POST", "/api/lanes/claim?wait=30", Some(&bearer), "");
            (answer, Instant::now())
        });
        // The claim is waiting once the board shows the lane so.
        let store = common::store(&board);
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.lane_stats().unwrap()[0].lane.waiting_until.is_none() {
            assert!(Instant::now() < deadline, "the claim never waited");
            std::thread::yield_now();
        }
        let title = format!("ready {round}");
        board.create(&[&title, "--assignee", "default"]);
        let ready = Instant::now();
        let ((status, body), answered) = waiting.join().unwrap();
        assert_eq!(status, 200, "{body}");
        latencies.push(answered.saturating_duration_since(ready));
        let claim: Value = serde_json::from_str(&body).unwrap();
        let done = format!("/api/lanes/tasks/{}/complete", claim["task_id"].as_str().unwrap());
        let run = format!("{{\"run_id\": {}}}", claim["run_id"]);
        assert_eq!(http(&addr, "POST", &done, Some(&token), &run).0, 200);
    }
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    assert!(
        median < Duration::from_millis(50),
        "ready -> claimed: {latencies:?}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A gateway board whose `ext` profile is served by lanes, and whose `coder` profile by
/// the gateway's own workers; `lanes` sets the `lanes:` section.
fn shared_board(lanes: &str) -> GatewayBoard {
    let profiles = format!(
        "{}  ext:\n    description: outside agents\n    external: true\nlanes:\n{lanes}",
        worker_profile("coder", "kanban complete --result ok")
    );
    GatewayBoard::new(Setup {
        max_spawn: 4,
        profiles: &profiles,
        interval_seconds: 0.2,
        ..Setup::default()
    })
}

/// A lane on the command line: claim (waiting up to `first_wait` seconds for the first
/// task, then 2), then complete with the run it was given, until a wait ends empty.
/// Returns how many it did.
fn cli_lane(b: &GatewayBoard, lane: &str, first_wait: &str) -> usize {
    let mut done = 0;
    loop {
        let wait = if done == 0 { first_wait } else { "2" };
        let out = b.kanban(&["--json", "claim", "--lane", lane, "--wait", wait]);
        if out.status.code() == Some(3) {
            return done;
        }
        assert!(out.status.success(), "{out:?}");
        let claim: Value = serde_json::from_slice(&out.stdout).unwrap();
        let (task, run) = (claim["task_id"].as_str().unwrap(), claim["run_id"].to_string());
        b.kanban_ok(&["complete", task, "--run", &run, "--result", "by the cli lane"]);
        done += 1;
    }
}

#[test]
fn lanes_on_the_cli_http_and_mcp_share_200_tasks_with_the_gateways_workers() {
    let mut b = shared_board("  max_held: 2\n");
    let cli_token = token_of(&b.kanban_ok(&["--json", "lane", "create", "cli", "--profile", "ext"]));
    assert!(cli_token.starts_with("kl_"));
    let http_token = token_of(&b.kanban_ok(&["--json", "lane", "create", "py", "--profile", "ext"]));
    let mcp_token = token_of(&b.kanban_ok(&["--json", "lane", "create", "mcp", "--profile", "ext"]));
    let mut ids: Vec<(TaskId, bool)> = Vec::new();
    for i in 0..67 {
        ids.push((
            b.create(&[&format!("coder task {i}"), "--assignee", "coder"]),
            false,
        ));
    }
    b.start_gateway();
    let mut serve = b.command(&["serve", "--bind", "127.0.0.1:0"]);
    serve.env("KANBAN_SERVE_TOKEN", common::SERVE_TOKEN);
    let (mut server, addr) = common::serving(serve);
    // The Python lanes wait long and are stopped once the board is done; each must
    // still be running then (a failed check ends it early).
    let mut worker = Command::new(venv_python())
        .arg(example())
        .args(["--url", &format!("http://{addr}"), "--wait", "30"])
        .env("KANBAN_LANE_TOKEN", &http_token)
        .stdout(Stdio::null())
        .spawn()
        .expect("the example worker");
    let mut agent = Command::new(venv_python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp/lane.py"))
        .args([&format!("http://{addr}/api/lanes/mcp"), &mcp_token, "30"])
        .stdout(Stdio::null())
        .spawn()
        .expect("the MCP lane");
    let by_cli = std::thread::scope(|scope| {
        let cli = scope.spawn(|| cli_lane(&b, "cli", "30"));
        // Every lane waits before the work appears, so each is there to take its share.
        b.wait_for("the three lanes waiting", || {
            let stats = b.db().lane_stats().unwrap();
            stats.iter().all(|l| l.state(board_home::now()) == "waiting")
        });
        for i in 0..133 {
            ids.push((b.create(&[&format!("lane task {i}"), "--assignee", "ext"]), true));
        }
        cli.join().unwrap()
    });
    b.wait_for("every task done", || {
        ids.iter().all(|(id, _)| b.task(id).status == Status::Done)
    });
    for lane in [&mut worker, &mut agent] {
        assert!(lane.try_wait().unwrap().is_none(), "a lane ended early: {lane:?}");
        lane.kill().unwrap();
        lane.wait().unwrap();
    }
    let db = b.db();
    for (id, external) in &ids {
        let runs = db.runs(id).unwrap();
        assert_eq!(runs.len(), 1, "{id} ran once: {runs:?}");
        match external {
            true => assert!(
                matches!(runs[0].lane.as_deref(), Some("cli" | "py" | "mcp")),
                "{runs:?}"
            ),
            false => assert!(
                runs[0].lane.is_none() && runs[0].worker_host.is_some(),
                "{runs:?}"
            ),
        }
    }
    let stats = db.lane_stats().unwrap();
    let done: Vec<(&str, u64)> = stats.iter().map(|l| (l.lane.name.as_str(), l.done)).collect();
    assert_eq!(done[0], ("cli", by_cli as u64), "{done:?}");
    assert_eq!(
        done.iter().map(|(_, n)| n).sum::<u64>(),
        133,
        "every external task by a lane: {done:?}"
    );
    assert!(done.iter().all(|(_, n)| *n > 0), "every lane worked: {done:?}");
    check_board(&b.snapshot()).unwrap();
    let status = b.kanban_ok(&["--json", "stats"]);
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["lanes"].as_array().unwrap().len(), 3, "{status:#}");
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn a_lane_that_stops_heartbeating_loses_its_task_to_another_after_the_lease() {
    let mut b = shared_board("  lease_seconds: 1\n");
    b.kanban_ok(&["lane", "create", "quiet", "--profile", "ext"]);
    b.kanban_ok(&["lane", "create", "next", "--profile", "ext"]);
    let task = b.create(&["contested", "--assignee", "ext"]);
    let first: Value = serde_json::from_str(&b.kanban_ok(&["--json", "claim", "--lane", "quiet"])).unwrap();
    assert_eq!(first["task_id"], task.as_str());
    b.start_gateway();
    // The quiet lane never reports: after its lease, a gateway ends the run and the task
    // goes to the lane waiting for it.
    let second: Value =
        serde_json::from_str(&b.kanban_ok(&["--json", "claim", "--lane", "next", "--wait", "20"])).unwrap();
    assert_eq!(second["task_id"], task.as_str());
    let late = b.kanban(&["complete", task.as_str(), "--run", &first["run_id"].to_string()]);
    assert_eq!(
        late.status.code(),
        Some(1),
        "the quiet lane's late report is refused: {late:?}"
    );
    let t = b.task(&task);
    assert_eq!((t.status, t.lane()), (Status::Running, Some("next")));
    let runs = b.db().runs(&task).unwrap();
    assert_eq!(runs[0].outcome, Some(board_core::Outcome::Stale), "{runs:?}");
    let stats = b.db().lane_stats().unwrap();
    let quiet = stats.iter().find(|l| l.lane.name == "quiet").unwrap();
    assert_eq!((quiet.held, quiet.failed), (0, 1));
    check_board(&b.snapshot()).unwrap();
}
