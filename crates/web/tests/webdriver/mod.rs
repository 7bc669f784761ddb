//! Headless Chromium driven over WebDriver (chromedriver's HTTP endpoint), started with
//! the flags the browser tests and the browser benchmarks share: no sandbox, no GPU, no
//! QUIC, nothing fetched in the background, an empty profile. Used by `tests/browser.rs`
//! and `examples/bench_web.rs`; every failure is an error that says what went wrong.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a condition is awaited before it is a failure.
pub const WAIT: Duration = Duration::from_secs(15);

const FLAGS: [&str; 9] = [
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

/// A chromedriver with one browser session; dropping it ends both.
pub struct Driver {
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
    pub async fn start() -> Result<Driver, String> {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            if !Path::new(bin).exists() {
                return Err(format!(
                    "{bin} is missing: the browser tests and benchmarks need Debian's chromium and \
                     chromium-driver (apt-get install -y chromium chromium-driver)"
                ));
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port for chromedriver: {e}"))?
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start chromedriver: {e}"))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())?;
        let mut driver = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            http,
            _profile: tempfile::tempdir().map_err(|e| format!("no profile directory: {e}"))?,
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        while driver
            .http
            .get(format!("{}/status", driver.base))
            .send()
            .await
            .is_err()
        {
            if tokio::time::Instant::now() > deadline {
                return Err(format!("chromedriver did not answer within {WAIT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut args: Vec<String> = FLAGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", driver._profile.path().display()));
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args }
        }}});
        let reply = driver.call("POST", "/session", Some(caps)).await?;
        driver.session = reply["sessionId"]
            .as_str()
            .ok_or_else(|| format!("chromedriver gave no session id: {reply}"))?
            .to_owned();
        Ok(driver)
    }

    /// One WebDriver command; its `value`, or its error as an error.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or(json!({}))),
        };
        let reply: Value = request
            .send()
            .await
            .map_err(|e| format!("WebDriver {path}: {e}"))?
            .json()
            .await
            .map_err(|e| format!("WebDriver {path}: not JSON: {e}"))?;
        if !reply["value"]["error"].is_null() {
            return Err(format!("WebDriver {path}: {reply}"));
        }
        Ok(reply["value"].clone())
    }

    /// Navigates and waits for the page's load event.
    pub async fn go(&self, url: &str) -> Result<(), String> {
        let path = format!("/session/{}/url", self.session);
        self.call("POST", &path, Some(json!({ "url": url })))
            .await
            .map(drop)
    }

    /// Runs `source` in every document this browser opens from now on, before the page's
    /// own scripts (chromedriver's Chrome DevTools endpoint), so a page can be watched from
    /// its first byte.
    pub async fn on_new_document(&self, source: &str) -> Result<(), String> {
        let path = format!("/session/{}/goog/cdp/execute", self.session);
        let command = json!({
            "cmd": "Page.addScriptToEvaluateOnNewDocument",
            "params": { "source": source },
        });
        self.call("POST", &path, Some(command)).await.map(drop)
    }

    /// Runs `script` in the page; a promise it returns is awaited (chromedriver's script
    /// timeout, 30 s, bounds the wait).
    pub async fn script(&self, script: &str, args: Value) -> Result<Value, String> {
        let path = format!("/session/{}/execute/sync", self.session);
        self.call("POST", &path, Some(json!({ "script": script, "args": args })))
            .await
    }

    /// Waits, within [`WAIT`], until `script` returns something truthy, and returns it.
    pub async fn until(&self, what: &str, script: &str, args: Value) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let v = self.script(script, args.clone()).await?;
            if !(v.is_null() || v == json!(false) || v == json!("")) {
                return Ok(v);
            }
            if tokio::time::Instant::now() > deadline {
                let page = self
                    .script("return document.body ? document.body.innerText : ''", json!([]))
                    .await?;
                return Err(format!("no {what} within {WAIT:?}; the page says:\n{page}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sets the browser window's size (a phone's width, a desktop's).
    pub async fn window_size(&self, width: u32, height: u32) -> Result<(), String> {
        let path = format!("/session/{}/window/rect", self.session);
        self.call("POST", &path, Some(json!({ "width": width, "height": height })))
            .await
            .map(drop)
    }

    /// The page as a PNG.
    pub async fn screenshot(&self) -> Result<Vec<u8>, String> {
        use base64::Engine;
        let path = format!("/session/{}/screenshot", self.session);
        let png = self.call("GET", &path, None).await?;
        base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap_or_default())
            .map_err(|e| format!("a screenshot that is not base64: {e}"))
    }

    /// Ends the browser session (the browser exits), then chromedriver.
    pub async fn quit(self) -> Result<(), String> {
        let path = format!("/session/{}", self.session);
        self.call("DELETE", &path, None).await.map(drop)
    }
}
