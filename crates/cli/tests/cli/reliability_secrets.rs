//! Reliability: secrets and exposure. A canary API key, configured in `model.api_key` or
//! through `api_key_env`, is sent to the model but never lands in the gateway's stdout or
//! log, events, `llm_calls`, `gateway.json`, what the CLI prints, error messages or a
//! worker's environment, whether calls fail or succeed; not even a piece of it, so a
//! truncated or partly masked key is caught too. No response of `kanban serve` (pages,
//! API, event stream, errors, the decompose action, a worker's log tail) holds a piece
//! of the key or of a database password in its environment. The home is owner-only. Every listening
//! socket of our processes is on loopback.

use crate::gateway_board;

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use board_core::{BoardReads, LlmLedger, Status, TaskId};
use fake_llm::{Reply, Settings};
use gateway_board::{files_under, worker_profile, GatewayBoard, Setup};

const CANARY: &str = "sk-canary-7f3a91c4e2d05b68";
const CANARY_VAR: &str = "REL_CANARY_SECRET";
/// The shortest piece of the key a scan looks for.
const FRAGMENT: usize = 8;

/// The first piece of the canary that `bytes` holds, if any: every `FRAGMENT`-character
/// window of the key is looked for.
fn leaked(bytes: &[u8]) -> Option<String> {
    let pieces: HashSet<&[u8]> = CANARY.as_bytes().windows(FRAGMENT).collect();
    bytes
        .windows(FRAGMENT)
        .find(|w| pieces.contains(w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
}

#[test]
fn the_scan_finds_any_piece_of_the_key() {
    assert_eq!(leaked(CANARY.as_bytes()).as_deref(), Some("sk-canar"));
    let (head, tail) = CANARY.split_at(CANARY.len() - FRAGMENT);
    for shown in [
        format!("key {}...", &CANARY[..FRAGMENT + 2]),
        format!("key ****{tail}"),
        format!("{}{}", &head[..3], "*".repeat(head.len() - 3) + tail),
    ] {
        assert!(leaked(shown.as_bytes()).is_some(), "missed {shown:?}");
    }
    let masked = format!(
        "{}{}{}",
        &CANARY[..FRAGMENT - 1],
        "*".repeat(10),
        &CANARY[CANARY.len() - 4..]
    );
    assert_eq!(
        leaked(masked.as_bytes()),
        None,
        "{masked:?} shows no 8 characters of it"
    );
    assert_eq!(leaked(b"api_key_env: REL_CANARY_SECRET"), None);
}

const FANOUT: &str = r#"{"fanout": true, "rationale": "two parts", "tasks": [
    {"title": "first part", "body": "a", "assignee": "dumper", "parents": []},
    {"title": "second part", "body": "b", "assignee": "dumper", "parents": []}]}"#;

/// Dumps its environment into its workspace, then completes.
const DUMPER: &str = "env > \"$KANBAN_WORKSPACE/env.txt\"; kanban complete --result dumped";

/// Every CLI call of a scenario, with what it printed, so all of it can be scanned.
#[derive(Default)]
struct Transcript(Vec<(String, Output)>);

impl Transcript {
    fn run(&mut self, b: &GatewayBoard, args: &[&str]) -> Output {
        let out = b.kanban(args);
        self.0.push((format!("kanban {args:?}"), out.clone()));
        out
    }

    fn create(&mut self, b: &GatewayBoard, title: &str) -> TaskId {
        let out = self.run(b, &["create", title, "--triage", "--json"]);
        assert!(out.status.success(), "{out:?}");
        let task: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        task["id"].as_str().unwrap().parse().unwrap()
    }

    fn assert_clean(&self) {
        for (what, out) in &self.0 {
            for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
                if let Some(piece) = leaked(bytes) {
                    panic!("{what} printed {piece:?} of the key on {stream}");
                }
            }
        }
    }
}

fn scenario(model_extra: &str, env: Vec<(String, String)>, config_holds_key: bool) {
    let profiles = worker_profile("dumper", DUMPER);
    let mut b = GatewayBoard::new(Setup {
        fake: Settings {
            api_key: Some(CANARY.to_owned()),
            ..Settings::default()
        },
        model_extra,
        profiles: &profiles,
        max_spawn: 4,
        env,
        ..Setup::default()
    });
    b.reply("fans out", Reply::text(FANOUT));
    b.reply("always 500", Reply::error(500, "upstream exploded"));
    // Real providers echo a rejected key in their error body.
    b.reply(
        "echoes the key",
        Reply::error(401, format!("Incorrect API key provided: {CANARY}")),
    );
    b.reply(
        "key in prose",
        Reply::text(format!("Sure! By the way your key is {CANARY}.")),
    );
    let mut cli = Transcript::default();
    let root = cli.create(&b, "fans out");
    b.start_gateway();
    b.wait_for("the decomposition", || b.task(&root).status != Status::Triage);
    let children = b.children(&root);
    assert_eq!(children.len(), 2);
    b.wait_for("both dumpers to complete", || {
        children.iter().all(|c| b.task(c).status == Status::Done)
    });
    // A failing provider opens the breaker, and the 401 opens it at once (until the
    // config changes), pausing automatic decomposition for every card. So each failing
    // card is made only once the one before it was sent: every one of them reaches the
    // model, and the 401 comes last.
    let mut failing = Vec::new();
    for title in ["key in prose", "always 500", "echoes the key"] {
        let card = cli.create(&b, title);
        b.wait_for(&format!("{title:?} to be sent"), || b.bills(&card) >= 1);
        failing.push(card);
    }
    assert!(
        b.fake
            .requests()
            .iter()
            .all(|r| r.header("authorization") == Some(&format!("Bearer {CANARY}"))),
        "every request carried the key"
    );

    // What a person sees: a manual decomposition of each failing card, the card itself,
    // the effective config, the events and the stats.
    for card in &failing {
        cli.run(&b, &["decompose", card.as_str(), "--json"]);
        cli.run(&b, &["decompose", card.as_str()]);
        cli.run(&b, &["show", card.as_str(), "--json"]);
        cli.run(&b, &["show", card.as_str()]);
    }
    for args in [
        &["config", "check"][..],
        &["config", "check", "--json"],
        &["events"],
        &["events", "--json"],
        &["stats", "--json"],
        &["list", "--json"],
    ] {
        cli.run(&b, args);
    }
    cli.assert_clean();

    // Every byte the product wrote: the database (and its WAL), gateway.json, worker
    // logs, the workers' environment dumps, and beside the home the gateway's stdout and
    // log.
    b.kill_gateway();
    let snapshot = b.snapshot();
    let calls = b.db().llm_calls(None).unwrap();
    assert_eq!(calls.len(), b.fake.requests().len(), "every request billed");
    assert!(calls.iter().any(|c| c.http_status == Some(401)));
    let rows = serde_json::to_string(&(&snapshot, &calls)).unwrap();
    if let Some(piece) = leaked(rows.as_bytes()) {
        panic!("a row of the board holds {piece:?} of the key");
    }
    for c in &children {
        let dump = b.path().join("workspaces").join(c.as_str()).join("env.txt");
        let env = std::fs::read_to_string(dump).unwrap();
        assert!(env.contains("KANBAN_RUN_ID="), "a real dump: {env}");
        assert_eq!(
            leaked(env.as_bytes()),
            None,
            "a worker's environment holds the key"
        );
    }
    let log = b.gateway_log();
    assert!(log.contains("gateway started"), "a real log: {log}");
    assert!(!log.contains("panicked"), "{log}");
    if b.env.iter().any(|(k, v)| k == "KANBAN_LOG_FORMAT" && v == "json") {
        assert_json_lines(&log);
    }
    let config = b.path().join("config.yaml");
    let mut scanned = Vec::new();
    for file in files_under(b.dir.path()) {
        if config_holds_key && file == config {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap();
        if let Some(piece) = leaked(&bytes) {
            panic!("{} holds {piece:?} of the key", file.display());
        }
        scanned.push(file);
    }
    for must in [
        b.log_path(),
        b.stdout_path(),
        b.db_path(),
        b.path().join("gateway.json"),
    ] {
        assert!(scanned.contains(&must), "{} was not scanned", must.display());
    }
    eprintln!(
        "scanned {} files and {} CLI calls, {} requests, log of {} bytes",
        scanned.len(),
        cli.0.len(),
        calls.len(),
        log.len()
    );
    owner_only(&b.path());
}

/// The home and everything the product made in it is owner-only; what workers write in
/// their workspaces is theirs.
fn owner_only(home: &Path) {
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(home), 0o700, "{}", home.display());
    for dir in ["logs", "workspaces"] {
        let dir = home.join(dir);
        if dir.exists() {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
    }
    let workspaces = home.join("workspaces");
    for entry in std::fs::read_dir(&workspaces).into_iter().flatten().flatten() {
        assert_eq!(mode(&entry.path()), 0o700, "{}", entry.path().display());
    }
    let mut checked = Vec::new();
    for file in files_under(home) {
        if file.starts_with(&workspaces) {
            continue;
        }
        assert_eq!(mode(&file), 0o600, "{} is not 0600", file.display());
        checked.push(file.strip_prefix(home).unwrap().display().to_string());
    }
    for must in ["kanban.db", "config.yaml"] {
        assert!(checked.iter().any(|c| c == must), "{must} checked: {checked:?}");
    }
    assert!(checked.iter().any(|c| c.starts_with("logs/")), "{checked:?}");
}

#[test]
fn a_key_in_the_config_never_leaks() {
    scenario(
        &format!("  api_key: {CANARY}\n  api_key_env: KANBAN_REL_NO_KEY\n"),
        // The same key in a `*_API_KEY` variable of the gateway's environment.
        vec![("REL_EXTRA_API_KEY".to_owned(), CANARY.to_owned())],
        true,
    );
}

#[test]
fn a_key_from_the_environment_never_leaks() {
    // The variable's name does not end in `_API_KEY`: it is scrubbed because the
    // config names it.
    scenario(
        &format!("  api_key_env: {CANARY_VAR}\n"),
        vec![(CANARY_VAR.to_owned(), CANARY.to_owned())],
        false,
    );
}

#[test]
fn a_key_never_leaks_into_the_json_log_at_debug() {
    scenario(
        &format!("  api_key_env: {CANARY_VAR}\n"),
        vec![
            (CANARY_VAR.to_owned(), CANARY.to_owned()),
            ("KANBAN_LOG_FORMAT".to_owned(), "json".to_owned()),
            ("RUST_LOG".to_owned(), "debug".to_owned()),
        ],
        false,
    );
}

/// Every line of a JSON log is one object with a timestamp, a level and a message, and
/// the decompositions' lines carry their card as a field of its own.
fn assert_json_lines(log: &str) {
    let mut fields = std::collections::BTreeSet::new();
    for line in log.lines() {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        for key in ["timestamp", "level", "message"] {
            assert!(object.get(key).is_some_and(|v| v.is_string()), "no {key}: {line}");
        }
        fields.extend(object.as_object().unwrap().keys().cloned());
    }
    for field in ["task", "pid", "home"] {
        assert!(fields.contains(field), "no line has the field {field}: {log}");
    }
}

/// Listening sockets (state 0A) from /proc/net/tcp and tcp6: inode -> (local address
/// in the kernel's hex, port).
fn listeners() -> Vec<(u64, String, u16)> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || cols[3] != "0A" {
                continue;
            }
            let (addr, port) = cols[1].split_once(':').unwrap();
            let port = u16::from_str_radix(port, 16).unwrap();
            out.push((cols[9].parse().unwrap(), addr.to_owned(), port));
        }
    }
    out
}

fn is_loopback(hex: &str) -> bool {
    match hex.len() {
        // 127.0.0.0/8, little-endian: the last byte is 7F.
        8 => hex.ends_with("7F"),
        // ::1, or ::ffff:127.x.y.z (v4-mapped).
        32 => {
            hex == "00000000000000000000000001000000"
                || (hex.starts_with("0000000000000000FFFF0000") && hex.ends_with("7F"))
        }
        _ => false,
    }
}

/// The socket inodes a process holds.
fn sockets_of(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

#[test]
fn every_listening_socket_of_ours_is_on_loopback() {
    let profiles = worker_profile("sleeper", "exec sleep 30");
    let mut b = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 2,
        ..Setup::default()
    });
    let task = b.create(&["sleeps", "--assignee", "sleeper"]);
    b.start_gateway();
    b.wait_for("the worker", || {
        b.task(&task).lease.and_then(|l| l.worker_pid).is_some()
    });
    b.prove_ticks(1);
    let gateway = b.gateway.as_ref().unwrap().id();
    let worker = b.task(&task).lease.and_then(|l| l.worker_pid).unwrap() as u32;
    let listening = listeners();
    let mut ours = Vec::new();
    for (who, pid) in [
        ("test (fake model)", std::process::id()),
        ("gateway", gateway),
        ("worker", worker),
    ] {
        let held = sockets_of(pid);
        for (inode, addr, port) in &listening {
            if held.contains(inode) {
                eprintln!("{who} (pid {pid}) listens on {addr}:{port}");
                assert!(
                    is_loopback(addr),
                    "{who} listens on a non-loopback address {addr}:{port}"
                );
                assert_ne!(who, "gateway", "the gateway opens no listening socket");
                ours.push(*port);
            }
        }
    }
    assert!(
        ours.contains(&b.fake.addr().port()),
        "the fake model's listener was seen: {ours:?}"
    );
    assert!(b.fake.addr().ip().is_loopback());
}

const DB_PASSWORD: &str = "pw-dbsecret-2c8e5a1f9d73b604";

/// Every window of `FRAGMENT` characters of the key or of the database password that
/// `bytes` holds.
fn any_secret(bytes: &[u8]) -> Option<String> {
    leaked(bytes).or_else(|| {
        let pieces: HashSet<&[u8]> = DB_PASSWORD.as_bytes().windows(FRAGMENT).collect();
        bytes
            .windows(FRAGMENT)
            .find(|w| pieces.contains(w))
            .map(|w| String::from_utf8_lossy(w).into_owned())
    })
}

/// One HTTP/1.1 exchange with `kanban serve`, the whole response (status line, headers,
/// body) as received. An event stream never ends, so reading stops after `quiet` of
/// silence once something arrived.
fn exchange(addr: &str, method: &str, path: &str, body: Option<&str>) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        crate::common::SERVE_TOKEN,
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let mut out = Vec::new();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) if !out.is_empty() => break,
            Err(_) => assert!(
                started.elapsed() < gateway_board::WAIT,
                "{method} {path}: no answer"
            ),
        }
    }
    out
}

#[test]
fn kanban_serve_serves_no_secret() {
    let env = vec![
        ("PGPASSWORD".to_owned(), DB_PASSWORD.to_owned()),
        (
            "DATABASE_URL".to_owned(),
            format!("postgres://kanban:{DB_PASSWORD}@127.0.0.1/kanban"),
        ),
        ("REL_EXTRA_API_KEY".to_owned(), CANARY.to_owned()),
    ];
    let b = GatewayBoard::new(Setup {
        fake: Settings {
            api_key: Some(CANARY.to_owned()),
            ..Settings::default()
        },
        model_extra: &format!("  api_key: {CANARY}\n  api_key_env: KANBAN_REL_NO_KEY\n"),
        env,
        ..Setup::default()
    });
    b.reply(
        "fans out",
        Reply::text(
            r#"{"fanout": true, "rationale": "two", "tasks": [
                {"title": "first part", "body": "a", "parents": []},
                {"title": "second part", "body": "b", "parents": []}]}"#,
        ),
    );
    b.reply("always 500", Reply::error(500, "upstream exploded"));
    b.reply(
        "echoes the key",
        Reply::error(401, format!("Incorrect API key provided: {CANARY}")),
    );
    b.reply(
        "key in prose",
        Reply::text(format!("Sure! By the way your key is {CANARY}.")),
    );
    let cards: Vec<TaskId> = ["fans out", "always 500", "echoes the key", "key in prose"]
        .iter()
        .map(|t| b.create(&[t, "--triage"]))
        .collect();
    // A running card whose worker printed the key (the server knows it and masks it).
    let running = b.create(&["prints secrets"]);
    b.kanban_ok(&["claim", running.as_str()]);
    let logs = b.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(logs.join(format!("{running}.log")), format!("key {CANARY}\n")).unwrap();

    let mut cmd = b.command(&["serve", "--bind", "127.0.0.1:0"]);
    cmd.stderr(std::process::Stdio::piped())
        .env("KANBAN_SERVE_TOKEN", crate::common::SERVE_TOKEN);
    let (mut serve, addr) = crate::common::serving(cmd);

    let mut seen: Vec<(String, Vec<u8>)> = Vec::new();
    let mut fetch = |method: &str, path: &str, body: Option<&str>| {
        let response = exchange(&addr, method, path, body);
        seen.push((format!("{method} {path}"), response.clone()));
        String::from_utf8_lossy(&response).into_owned()
    };
    for card in &cards {
        let answer = fetch("POST", &format!("/api/tasks/{card}/decompose"), Some("{}"));
        assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
    }
    assert_eq!(b.fake.requests().len(), cards.len(), "every card asked the model");
    assert!(
        b.fake
            .requests()
            .iter()
            .all(|r| r.header("authorization") == Some(&format!("Bearer {CANARY}"))),
        "the decompose action sent the configured key"
    );
    assert_ne!(b.task(&cards[0]).status, Status::Triage, "the fan-out committed");
    let again = fetch("POST", &format!("/api/tasks/{}/decompose", cards[0]), Some("{}"));
    assert!(again.starts_with("HTTP/1.1 409"), "{again}");
    let detail = fetch("GET", &format!("/tasks/{running}"), None);
    assert!(detail.contains("[redacted]"), "the log tail was served: {detail}");
    let mut ids: Vec<TaskId> = b
        .db()
        .list(&Default::default())
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    ids.push(running.clone());
    for id in &ids {
        for path in [
            format!("/tasks/{id}"),
            format!("/tasks/{id}/drawer"),
            format!("/api/tasks/{id}"),
            format!("/api/cards/{id}"),
        ] {
            fetch("GET", &path, None);
        }
    }
    for path in [
        "/",
        "/stats",
        "/assets/board.js",
        "/assets/detail.js",
        "/assets/kanban.css",
        "/api/tasks",
        "/api/tasks?archived=true",
        "/api/cards",
        "/api/lane-list",
        "/api/tasks/nope",
        "/api/tasks?bogus=1",
        "/no/such/page",
    ] {
        fetch("GET", path, None);
    }
    fetch("POST", "/api/tasks", Some("{not json"));
    fetch(
        "POST",
        &format!("/api/tasks/{}/edit", cards[1]),
        Some(r#"{"bogus": 1}"#),
    );
    fetch("POST", "/api/tasks/t_00000000/decompose", Some("{}"));
    let stream = fetch("GET", "/api/events?after=0", None);
    assert!(stream.contains("text/event-stream"), "{stream}");
    assert!(
        stream.contains("decompos"),
        "the stream carried the decompositions: {stream}"
    );

    // The live log, read through the home as `kanban log` reads it, is masked as well.
    let log = fetch("GET", &format!("/api/tasks/{running}/log"), None);
    assert!(log.contains("data: \"key [redacted]\\n\""), "{log}");

    let _ = serve.kill();
    let out = serve.wait_with_output().unwrap();
    seen.push(("serve's stderr".to_owned(), out.stderr));
    for (what, bytes) in &seen {
        if let Some(piece) = any_secret(bytes) {
            panic!(
                "{what} served {piece:?} of a secret:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    eprintln!("scanned {} responses of kanban serve", seen.len());
}
