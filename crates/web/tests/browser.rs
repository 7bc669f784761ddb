//! The board in headless Chromium, driven over WebDriver (chromedriver's HTTP endpoint):
//! the cards show, a card created in the page lands in triage, a completion written by
//! another process moves a running card to done without a reload, a refused drag shows
//! its message, and screenshots of the board and a card's detail land in `target/web/`.
//!
//! Needs Debian's `chromium` and `chromium-driver`; without them this test fails and
//! says so.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use board_core::{Completion, NewTask, Store};
use board_sqlite::{Options, SqliteStore};
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(15);

struct Driver {
    child: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    async fn start() -> Driver {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(bin).exists(),
                "{bin} is missing: the browser tests need Debian's chromium and chromium-driver \
                 (apt-get install -y chromium chromium-driver)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().unwrap();
        let mut driver = Driver {
            child,
            base,
            session: String::new(),
            http,
            _profile: profile,
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        while driver
            .http
            .get(format!("{}/status", driver.base))
            .send()
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver did not answer within {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,900",
        ];
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", driver._profile.path().display()));
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args }
        }}});
        let reply = driver.call("POST", "/session", Some(caps)).await;
        driver.session = reply["sessionId"].as_str().expect("a session id").to_owned();
        driver
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            _ => self.http.post(url).json(&body.unwrap_or(json!({}))),
        };
        let reply: Value = request
            .send()
            .await
            .expect("WebDriver")
            .json()
            .await
            .expect("WebDriver JSON");
        assert!(reply["value"]["error"].is_null(), "WebDriver {path}: {reply}");
        reply["value"].clone()
    }

    async fn go(&self, url: &str) {
        self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            Some(json!({ "url": url })),
        )
        .await;
    }

    async fn script(&self, script: &str, args: Value) -> Value {
        let path = format!("/session/{}/execute/sync", self.session);
        self.call("POST", &path, Some(json!({ "script": script, "args": args })))
            .await
    }

    /// Waits, within a bounded time, until `script` returns something truthy.
    async fn until(&self, what: &str, script: &str, args: Value) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let v = self.script(script, args.clone()).await;
            if !(v.is_null() || v == json!(false) || v == json!("")) {
                return v;
            }
            let page = self
                .script("return document.body ? document.body.innerText : ''", json!([]))
                .await;
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what} within {WAIT:?}; the page says:\n{page}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn screenshot(&self, name: &str) {
        let png = self
            .call("GET", &format!("/session/{}/screenshot", self.session), None)
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        let dir = target_dir().join("web");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

const IN_COLUMN: &str =
    "const c = document.querySelector('#col-' + arguments[0] + ' #card-' + arguments[1]); return !!c;";

#[tokio::test(flavor = "multi_thread")]
async fn the_board_in_a_real_browser() {
    let s = common::serve().await;
    let seeded = s
        .store
        .create(
            &NewTask {
                body: "# Plan\n\n- one\n- two".into(),
                ..NewTask::titled("seeded card")
            },
            common::NOW,
        )
        .unwrap();
    let running = s.task("running card");
    let claim = s.store.claim(&running.id, 900, common::NOW).unwrap();
    let browser = Driver::start().await;

    browser.go(&s.base).await;
    browser
        .until("the seeded card in ready", IN_COLUMN, json!(["ready", seeded.id]))
        .await;
    browser
        .until(
            "the running card in running",
            IN_COLUMN,
            json!(["running", running.id]),
        )
        .await;
    browser
        .until(
            "the stream connected",
            "return document.getElementById('live').textContent.includes('live')",
            json!([]),
        )
        .await;

    // A card created in the page lands in triage.
    browser.script(
        "const f = document.getElementById('create'); f.title.value = arguments[0]; f.into.value = 'triage'; f.requestSubmit();",
        json!(["made in the page"]),
    ).await;
    browser
        .until(
            "the new card in triage",
            "return document.querySelector('#col-triage').innerText.includes(arguments[0])",
            json!(["made in the page"]),
        )
        .await;

    // Another writer (as `kanban complete` from a shell) finishes the running card.
    let other = SqliteStore::open(s.store_path(), &Options::default()).unwrap();
    let completion = Completion {
        expected_run_id: Some(claim.run_id),
        result: Some("ok".into()),
        ..Completion::default()
    };
    assert!(other.complete(&running.id, &completion, common::NOW).unwrap());
    browser
        .until(
            "the completed card in done without a reload",
            IN_COLUMN,
            json!(["done", running.id]),
        )
        .await;

    // A drag the board refuses shows why.
    browser.script(
        "const dt = new DataTransfer(); dt.setData('text/plain', arguments[0]);
         document.getElementById('col-done').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));",
        json!([seeded.id]),
    ).await;
    let message = browser.until(
        "the refusal shown",
        "const m = document.getElementById('message'); return m.classList.contains('bad') && m.textContent;",
        json!([]),
    ).await;
    assert!(
        message
            .as_str()
            .unwrap()
            .contains("no action moves a card from ready to done"),
        "{message}"
    );
    browser.screenshot("board.png").await;

    browser.go(&format!("{}/tasks/{}", s.base, seeded.id)).await;
    browser
        .until(
            "the rendered body",
            "return !!document.querySelector('.markdown h1')",
            json!([]),
        )
        .await;
    browser.screenshot("detail.png").await;
}
