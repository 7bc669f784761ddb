//! A model through an outage, for `cargo xtask bench --only outage`: every request gets
//! HTTP 500 for the first `--outage-seconds` after start, then a two-step decomposition
//! that kanban and the Hermes kanban both accept.
//!
//! It prints its base URL as the first stdout line. Each line read on stdin is answered
//! with one JSON line of the requests so far, `{"during": N, "after": M}` (received
//! during the outage, and after it); end of input stops it.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fake_llm::{FakeLlm, Reply, Settings};

const DECOMPOSITION: &str = r#"{"fanout": true, "rationale": "two steps", "tasks": [
  {"title": "First half", "body": "Done when the first half works.", "parents": []},
  {"title": "Second half", "body": "Done when the second half works.", "parents": [0]}]}"#;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds = match args.as_slice() {
        [flag, value] if flag == "--outage-seconds" => value.parse::<u64>().ok(),
        _ => None,
    };
    let Some(seconds) = seconds else {
        eprintln!("usage: outage_model --outage-seconds N");
        return ExitCode::from(2);
    };
    let now_ms = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    let healed_at = now_ms() + Duration::from_secs(seconds).as_millis() as u64;
    let llm = match FakeLlm::start_blocking(Settings::default()) {
        Ok(llm) => llm,
        Err(e) => {
            eprintln!("outage_model: cannot listen on 127.0.0.1: {e}");
            return ExitCode::FAILURE;
        }
    };
    llm.respond_with(move |request| {
        if request.received_at_ms < healed_at {
            Reply::error(500, "the provider is down")
        } else {
            Reply::text(DECOMPOSITION)
        }
    });
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", llm.base_url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        let requests = llm.requests();
        let during = requests.iter().filter(|r| r.received_at_ms < healed_at).count();
        let after = requests.len() - during;
        if writeln!(stdout, "{{\"during\": {during}, \"after\": {after}}}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}
