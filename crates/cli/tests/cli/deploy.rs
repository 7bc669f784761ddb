//! A deployed gateway: `/metrics` scraped and parsed by the Python `prometheus_client`
//! (a parser we did not write) after a workload of real workers, its numbers against
//! the board; `/healthz` on time and late; SIGHUP with a changed `max_spawn` and with a
//! broken file.

use std::collections::BTreeMap;
use std::process::Command;

use board_core::{LlmLedger, Status, TaskId};
use serde_json::Value;

use fake_llm::Reply;

use crate::common::venv_python;
use crate::gateway_board::{worker_profile, GatewayBoard, Setup};

/// Fetches `url` with Python's urllib: `(status, body)`.
const FETCH: &str = r#"
import json, sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        status, body = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read().decode()
if len(sys.argv) > 2 and status == 200:
    from prometheus_client.parser import text_string_to_metric_families
    body = [[s.name, s.labels, s.value]
            for family in text_string_to_metric_families(body) for s in family.samples]
print(json.dumps({"status": status, "body": body}))
"#;

fn fetch(url: &str, parse: bool) -> (u16, Value) {
    let mut command = Command::new(venv_python());
    command.args(["-c", FETCH, url]);
    if parse {
        command.arg("parse");
    }
    let out = command.output().expect("run python");
    assert!(
        out.status.success(),
        "python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply: Value = serde_json::from_slice(&out.stdout).expect("python's JSON");
    (reply["status"].as_u64().unwrap() as u16, reply["body"].clone())
}

/// The parsed samples: `name{label=value,...}` -> value.
fn samples(body: &Value) -> BTreeMap<String, f64> {
    body.as_array()
        .expect("samples")
        .iter()
        .map(|s| {
            let labels: Vec<String> = s[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
                .collect();
            let key = if labels.is_empty() {
                s[0].as_str().unwrap().to_owned()
            } else {
                format!("{}{{{}}}", s[0].as_str().unwrap(), labels.join(","))
            };
            (key, s[2].as_f64().unwrap())
        })
        .collect()
}

/// The metrics address the gateway logged.
fn metrics_address(b: &GatewayBoard) -> String {
    let address = || {
        b.gateway_log()
            .lines()
            .find(|l| l.contains("serving /healthz and /metrics"))
            .and_then(|l| l.split("address=").nth(1))
            .map(|a| a.split_whitespace().next().unwrap_or_default().to_owned())
    };
    b.wait_for("the metrics address in the log", || address().is_some());
    address().unwrap()
}

fn write_config(b: &GatewayBoard, text: &str) {
    std::fs::write(b.path().join("config.yaml"), text).unwrap();
}

fn hangup(b: &GatewayBoard) {
    let pid = b.gateway.as_ref().unwrap().id() as i32;
    // SAFETY: signalling the gateway this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
}

fn log_lines_with(b: &GatewayBoard, needle: &str) -> usize {
    b.gateway_log().lines().filter(|l| l.contains(needle)).count()
}

/// Waits for the `count`th log line holding `needle`, and returns it.
fn nth_log_line(b: &GatewayBoard, needle: &str, count: usize) -> String {
    b.wait_for(needle, || log_lines_with(b, needle) == count);
    let log = b.gateway_log();
    log.lines()
        .filter(|l| l.contains(needle))
        .nth(count - 1)
        .unwrap()
        .to_owned()
}

#[test]
fn metrics_and_health_match_the_board_and_sighup_reloads_the_config() {
    venv_python();
    let mut b = GatewayBoard::new(Setup {
        max_spawn: 4,
        profiles: &worker_profile("worker", "kanban complete --result done"),
        ..Setup::default()
    });
    let config = std::fs::read_to_string(b.path().join("config.yaml")).unwrap();
    let config = format!("{config}gateway:\n  metrics_bind: 127.0.0.1:0\n");
    write_config(&b, &config);
    let tasks: Vec<TaskId> = (0..20)
        .map(|i| b.create(&[&format!("task {i}"), "--assignee", "worker"]))
        .collect();
    // One decomposition through the fake model: the card is specified into one task.
    b.reply(
        "tighten the docs",
        Reply::text(r#"{"fanout": false, "title": "tighten the docs", "body": "one page"}"#),
    );
    let card = b.create(&["tighten the docs", "--triage", "--assignee", "worker"]);
    b.start_gateway();
    let base = format!("http://{}", metrics_address(&b));
    b.wait_for("the 20 tasks and the card done", || {
        tasks
            .iter()
            .chain([&card])
            .all(|t| b.task(t).status == Status::Done)
    });
    b.prove_ticks(2);

    let (status, body) = fetch(&format!("{base}/metrics"), true);
    assert_eq!(status, 200, "{body}");
    let metrics = samples(&body);
    let snapshot = b.snapshot();
    for s in Status::ALL {
        let on_board = snapshot.tasks.iter().filter(|t| t.status == *s).count() as f64;
        let key = format!("kanban_tasks{{status={}}}", s.as_str());
        assert_eq!(metrics.get(&key), Some(&on_board), "{key} in {metrics:#?}");
    }
    let completed = snapshot
        .runs
        .iter()
        .filter(|r| r.outcome.is_some_and(|o| o.as_str() == "completed"))
        .count();
    assert_eq!(completed, 21);
    assert_eq!(
        metrics["kanban_runs_ended_total{outcome=completed}"],
        completed as f64
    );
    assert_eq!(metrics["kanban_spawns_total"], 21.0);
    let events = |kind: &str| snapshot.events.iter().filter(|e| e.kind == kind).count() as f64;
    // The card, and the probe cards prove_ticks has decomposed the same way.
    assert!(snapshot
        .events
        .iter()
        .any(|e| e.task_id == card && e.kind == "specified"));
    for (outcome, kind) in [
        ("split", "decomposed"),
        ("specified", "specified"),
        ("parked", "auto_decompose_parked"),
    ] {
        let key = format!("kanban_decompositions_total{{outcome={outcome}}}");
        assert_eq!(metrics.get(&key), Some(&events(kind)), "{key} in {metrics:#?}");
    }
    assert_eq!(metrics["kanban_decompositions_total{outcome=failed}"], 0.0);
    assert_eq!(metrics["kanban_breaker_open"], 0.0);
    assert!(!b.db().breaker().unwrap().open);
    assert!(!metrics.contains_key("kanban_breaker_next_probe_timestamp_seconds"));
    let calls = b.db().llm_calls(None).unwrap();
    assert_eq!(
        metrics["kanban_llm_requests_total{outcome=ok}"],
        calls.len() as f64
    );
    assert_eq!(metrics["kanban_llm_failures_total"], 0.0);
    let prompt: i64 = calls.iter().filter_map(|c| c.prompt_tokens).sum();
    assert_eq!(metrics["kanban_llm_tokens_total{kind=prompt}"], prompt as f64);
    assert!(metrics["kanban_ticks_total"] >= 3.0, "{metrics:#?}");
    assert!(metrics["kanban_tick_duration_seconds_count"] >= 3.0);
    assert_eq!(metrics["kanban_workers_running"], 0.0);
    let (status, body) = fetch(&format!("{base}/healthz"), false);
    assert_eq!((status, body.as_str()), (200, Some("ok\n")));

    // A valid edit: max_spawn 0 takes effect at the next tick, named in one INFO line.
    write_config(&b, &config.replace("max_spawn: 4", "max_spawn: 0"));
    let asked = b.kanban_ok(&["gateway", "reload"]);
    assert!(
        asked.contains(&format!("pid {}", b.gateway.as_ref().unwrap().id())),
        "{asked}"
    );
    let line = nth_log_line(&b, "config reloaded", 1);
    assert!(
        line.contains("INFO") && line.contains("changed=kanban.max_spawn"),
        "{line}"
    );
    let waiting = b.create(&["waits", "--assignee", "worker"]);
    b.prove_ticks(2);
    assert_eq!(
        b.task(&waiting).status,
        Status::Ready,
        "max_spawn 0 spawns nothing"
    );

    // A broken edit is refused, naming its key; the running config (max_spawn 0) is kept.
    // `kanban gateway reload` checks the file first: refused in one line naming the key,
    // and the gateway is not signalled (its log gains no reload line).
    write_config(&b, &config.replace("max_spawn: 4", "max_spawn: four"));
    // The CLI refuses the broken file (so no probe card can prove ticks): they are
    // counted in gateway.json.
    let ticks = || -> u64 {
        std::fs::read(b.path().join("gateway.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|status| status["ticks"].as_u64())
            .unwrap_or(0)
    };
    let out = b.kanban(&["gateway", "reload"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("kanban.max_spawn"), "{stderr}");
    let before = ticks();
    b.wait_for("two more ticks", || ticks() >= before + 2);
    assert_eq!(log_lines_with(&b, "config reload"), 1, "{}", b.gateway_log());
    // SIGHUP itself: one ERROR line naming the key, and the running config kept.
    hangup(&b);
    let line = nth_log_line(&b, "config reload refused", 1);
    assert!(
        line.contains("ERROR") && line.contains("kanban.max_spawn"),
        "{line}"
    );
    let before = ticks();
    b.wait_for("three more ticks", || ticks() >= before + 3);
    assert_eq!(b.task(&waiting).status, Status::Ready);
    assert!(b.gateway_alive());

    // Ticks that stop (the board locked by another writer while a tick must claim) make
    // /healthz 503; once they resume it is 200 again, and the waiting task runs.
    let lock = rusqlite::Connection::open(b.db_path()).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    write_config(&b, &config);
    hangup(&b);
    nth_log_line(&b, "config reloaded", 2);
    b.wait_for("/healthz to say 503", || {
        fetch(&format!("{base}/healthz"), false).0 == 503
    });
    lock.execute_batch("COMMIT").unwrap();
    drop(lock);
    b.wait_for("the waiting task done", || {
        b.task(&waiting).status == Status::Done
    });
    b.wait_for("/healthz to say 200", || {
        fetch(&format!("{base}/healthz"), false).0 == 200
    });
    assert!(!b.gateway_log().contains("panicked"));

    b.kill_gateway();
    let out = b.kanban(&["gateway", "reload"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("kanban: no gateway is running on "),
        "{stderr}"
    );
}

fn status(b: &GatewayBoard) -> Value {
    serde_json::from_str(&b.kanban_ok(&["gateway", "status", "--json"])).unwrap()
}

#[test]
fn status_tells_a_running_a_stopped_and_a_crashed_gateway_apart() {
    let mut b = GatewayBoard::new(Setup::default());
    let s = status(&b);
    assert_eq!(
        (s["state"].as_str(), &s["pid"]),
        (Some("stopped"), &Value::Null),
        "{s}"
    );

    b.start_gateway();
    let pid = b.gateway.as_ref().unwrap().id();
    b.prove_ticks(1);
    let s = status(&b);
    assert_eq!(s["state"], "running", "{s}");
    assert_eq!(s["pid"], pid);
    assert!(s["ticks"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["workers"], 0);
    assert_eq!(s["breaker"], "closed", "{s}");
    assert!((0..60).contains(&s["uptime_seconds"].as_i64().unwrap()), "{s}");
    assert!(
        (0..5).contains(&s["last_tick_age_seconds"].as_i64().unwrap()),
        "{s}"
    );
    let text = b.kanban_ok(&["gateway", "status"]);
    assert!(text.starts_with("state          running\n"), "{text}");

    // `gateway stop` (no systemd involved): SIGTERM, then it waits for the exit.
    let stopped = b.kanban_ok(&["gateway", "stop"]);
    assert!(stopped.contains(&format!("pid {pid}")), "{stopped}");
    let exit = b.gateway.take().unwrap().wait().unwrap();
    assert!(exit.success(), "a clean stop exits 0: {exit:?}");
    let s = status(&b);
    assert_eq!(
        (s["state"].as_str(), &s["pid"]),
        (Some("stopped"), &Value::Null),
        "{s}"
    );
    assert!(
        s["ticks"].as_u64().unwrap() >= 1,
        "the last gateway's figures: {s}"
    );
    let out = b.kanban(&["gateway", "stop"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no gateway is running"));

    b.start_gateway();
    let pid = b.gateway.as_ref().unwrap().id();
    b.sigkill_running_gateway();
    let s = status(&b);
    assert_eq!(
        (s["state"].as_str(), &s["pid"]),
        (Some("crashed"), &Value::from(pid)),
        "{s}"
    );
    assert_eq!(s["uptime_seconds"], Value::Null);
}

/// Sets this process's soft descriptor limit to `limit` (at most the hard limit).
fn descriptor_limit(limit: u64) -> std::io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit this frame owns.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut current) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        current.rlim_cur = limit.min(current.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &current) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A gateway under systemd's default limit of 1,024 descriptors, its metrics port held
/// by 1,000 connections that never finish their headers: the port takes only a few at a
/// time, so the gateway keeps the descriptors it spawns workers with, and its work goes
/// on.
#[test]
fn a_flood_of_half_open_connections_cannot_starve_the_gateway() {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    let mut b = GatewayBoard::new(Setup {
        max_spawn: 2,
        profiles: &worker_profile("worker", "kanban complete --result done"),
        ..Setup::default()
    });
    let config = std::fs::read_to_string(b.path().join("config.yaml")).unwrap();
    write_config(&b, &format!("{config}gateway:\n  metrics_bind: 127.0.0.1:0\n"));
    b.start_gateway_with(|command| {
        // SAFETY: setrlimit between fork and exec changes only the child's limit.
        unsafe {
            command.pre_exec(|| descriptor_limit(1024));
        }
    });
    let address = metrics_address(&b);
    // This test's own connections need more than 1,024 descriptors.
    descriptor_limit(4096).unwrap();
    // Up to 1,000, far more than the port holds at once: the rest wait in the kernel's
    // listen queue, which costs the gateway no descriptor, until that is full and a
    // connection is no longer taken (the flood stops there).
    let address: std::net::SocketAddr = address.parse().unwrap();
    let mut held = Vec::new();
    while held.len() < 1000 {
        let Ok(mut stream) =
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(2))
        else {
            break;
        };
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
        held.push(stream);
    }
    assert!(held.len() >= 100, "only {} connections were made", held.len());
    eprintln!("{} half-open connections held", held.len());
    let tasks: Vec<TaskId> = (0..4)
        .map(|i| b.create(&[&format!("work {i}"), "--assignee", "worker"]))
        .collect();
    b.wait_for("every task done while the port is flooded", || {
        tasks.iter().all(|t| b.task(t).status == Status::Done)
    });
    let pid = b.gateway.as_ref().unwrap().id();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    assert!(open < 200, "the gateway holds {open} descriptors");
    assert!(
        !b.gateway_log().contains("Too many open files"),
        "{}",
        b.gateway_log()
    );
    drop(held);
}
