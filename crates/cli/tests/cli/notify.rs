//! Notifications: `notify-subscribe` and its siblings on the command line, and webhook
//! deliveries to a local receiver that fails, times out, then recovers: every event it
//! hears lands exactly once as accepted, in order, each attempt signed as the receiver
//! checks with Python's own `hmac` module.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use board_core::Status;
use serde_json::Value;

use crate::common::Board;
use crate::gateway_board::{worker_profile, GatewayBoard, Setup};

/// A webhook receiver: the first request is answered 500, the second only after the
/// sender gave up (it sleeps 3 s), the rest 200. Each request is a JSON line in `log`:
/// its number, delivery key, event kind and id, and whether its signature held.
const RECEIVER: &str = r#"
import hashlib, hmac, http.server, json, sys, time
secret, log = sys.argv[1].encode(), sys.argv[2]
count = 0
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        count += 1
        n = count
        body = self.rfile.read(int(self.headers["Content-Length"]))
        expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        ok = hmac.compare_digest(expected, self.headers.get("X-Kanban-Signature", ""))
        doc = json.loads(body)
        status = 500 if n == 1 else 200
        with open(log, "a") as f:
            f.write(json.dumps({"n": n, "delivery": self.headers["X-Kanban-Delivery"],
                                "kind": self.headers["X-Kanban-Event"], "event": doc["event"]["id"],
                                "signed": ok, "status": status}) + "\n")
        if n == 2:
            time.sleep(3)
        self.send_response(status)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

const SECRET: &str = "a-shared-secret-0123456789";

struct Receiver {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Receiver {
    fn start(dir: &std::path::Path) -> Receiver {
        let script = dir.join("receiver.py");
        std::fs::write(&script, RECEIVER).unwrap();
        let log = dir.join("received.jsonl");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(SECRET)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Receiver {
            child,
            port: line.trim().parse().expect("a port"),
            log,
        }
    }

    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn deliveries_survive_a_failure_and_a_timeout_and_land_once_each_in_order_signed() {
    let profiles = worker_profile("quick", "kanban complete --result ok");
    let mut board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 1,
        ..Setup::default()
    });
    board.kanban_ok(&["config", "set", "gateway.notify_timeout_seconds", "1"]);
    let receiver = Receiver::start(&board.path());
    let url = format!("http://127.0.0.1:{}/hook", receiver.port);
    let said = board.kanban_ok(&[
        "notify-subscribe",
        "--all",
        "--kinds",
        "completed",
        "--webhook",
        &url,
        "--secret",
        SECRET,
    ]);
    assert!(
        said.starts_with("Subscribed 1: board -> http://127.0.0.1:"),
        "{said}"
    );
    let tasks: Vec<_> = (0..3)
        .map(|n| board.create(&[&format!("task {n}"), "--assignee", "quick"]))
        .collect();
    board.start_gateway();
    board.wait_for("every task done", || {
        tasks.iter().all(|t| board.task(t).status == Status::Done)
    });
    board.wait_for("three deliveries accepted", || {
        receiver
            .received()
            .iter()
            .filter(|r| r["status"] == 200 && r["n"] != 2)
            .count()
            >= 3
    });
    let received = receiver.received();
    assert!(received.iter().all(|r| r["signed"] == true), "{received:?}");
    assert!(received.iter().all(|r| r["kind"] == "completed"), "{received:?}");
    // The first event was tried three times under one key (500, a timeout, 200), then
    // each of the others once.
    let keys: Vec<&str> = received.iter().map(|r| r["delivery"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 5, "{received:?}");
    assert!(keys[0] == keys[1] && keys[1] == keys[2], "{keys:?}");
    let events: Vec<i64> = received[2..]
        .iter()
        .map(|r| r["event"].as_i64().unwrap())
        .collect();
    assert!(
        events.windows(2).all(|w| w[0] < w[1]),
        "in event order: {events:?}"
    );
    let snapshot = board.snapshot();
    let completed: Vec<i64> = snapshot
        .events
        .iter()
        .filter(|e| e.kind == "completed")
        .map(|e| e.id)
        .collect();
    assert_eq!(events, completed, "every completed event, once");
    let listed = board.kanban_ok(&["notify-list"]);
    assert!(
        listed.contains("[1] board  http://127.0.0.1:")
            && listed.contains("active")
            && listed.contains("last 200"),
        "{listed}"
    );
}

#[test]
fn bad_subscriptions_are_refused_in_one_line_and_the_secret_shows_once() {
    let board = Board::init();
    let id = board.create(&["watched"]);
    let before = board.snapshot();
    for (args, code, said) in [
        (
            &["notify-subscribe", "--all", "--webhook", "ftp://x"][..],
            1,
            "not a webhook URL",
        ),
        (
            &["notify-subscribe", "--all", "--webhook", "http://u:p@host/"],
            1,
            "no credentials",
        ),
        (
            &["notify-subscribe", "t_00000000", "--webhook", "http://h/"],
            1,
            "no such task",
        ),
        (
            &[
                "notify-subscribe",
                "--all",
                "--webhook",
                "http://h/",
                "--secret",
                "short",
            ],
            1,
            "at least 16 bytes",
        ),
        (
            &[
                "notify-subscribe",
                "--all",
                "--webhook",
                "http://h/",
                "--kinds",
                "Done!",
            ],
            1,
            "not an event kind",
        ),
        (&["notify-subscribe", "--webhook", "http://h/"], 2, "<ID>"),
        (&["notify-unsubscribe", "7"], 1, "no such subscription: 7"),
        (&["notify-resume", "7"], 1, "no such subscription: 7"),
    ] {
        let (got, _, err) = board.outcome(args, &[]);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(said) && err.lines().count() <= 2, "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before);
    let made = board.ok(&[
        "notify-subscribe",
        &id,
        "--webhook",
        "https://example.com/h?token=abc",
    ]);
    let secret = made
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("secret: "))
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(secret.len(), 64, "{made}");
    assert!(!made.contains("token=abc"), "the query is masked: {made}");
    let listed = board.ok(&["notify-list"]);
    assert!(
        !listed.contains(secret) && !listed.contains("token=abc"),
        "{listed}"
    );
    let json = board.json(&["notify-list"]);
    assert!(json[0].get("secret").is_none(), "{json}");
    assert_eq!(
        json[0]["kinds"],
        serde_json::json!(["completed", "blocked", "review_requested", "gave_up"])
    );
    assert_eq!(
        board.ok(&["notify-unsubscribe", "1"]),
        "Unsubscribed 1 (https://example.com/h?…)\n"
    );
    assert_eq!(board.ok(&["notify-list"]), "No subscriptions\n");
}
