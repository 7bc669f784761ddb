//! The outage cost: what a one-hour provider outage costs with 100 triage cards, and how
//! soon the cards are decomposed once the provider is back.
//!
//! Time is compressed 30 times for both boards alike: the hour is 120 s, the default
//! 60 s tick (ours and Hermes') is 2 s, and our default 30 s retry base is 1 s. The model
//! (`fake-llm`'s `outage_model` example) answers HTTP 500 from its start until the
//! outage ends, then a two-step decomposition. Each board runs with its defaults
//! otherwise: three automatic decompositions per tick, its own retries.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::gateway::{new_home, start_gateway, wait_for, Running};
use super::{json_line, mkdir, output, Paths, Results, Row};

pub(crate) const CARDS: usize = 100;
/// One hour, compressed.
pub(crate) const OUTAGE: Duration = Duration::from_secs(120);
/// The default tick of both boards (60 s), compressed.
pub(crate) const TICK_SECONDS: u64 = 2;
/// How long after the outage the cards may take to be decomposed (1.5 h compressed).
pub(crate) const RECOVERY_LIMIT: Duration = Duration::from_secs(180);

/// The model through its outage, and the requests it has counted.
pub(crate) struct OutageModel {
    _process: Running,
    input: ChildStdin,
    replies: BufReader<ChildStdout>,
    pub(crate) base_url: String,
    pub(crate) healed_at: Instant,
}

/// Requests the model received during the outage and after it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    pub(crate) during: u64,
    pub(crate) after: u64,
}

impl OutageModel {
    pub(crate) fn start(paths: &Paths) -> Result<OutageModel, String> {
        let mut process = Running::spawn_keeping_stdin(
            Command::new(paths.examples.join("outage_model"))
                .args(["--outage-seconds", &OUTAGE.as_secs().to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )?;
        let healed_at = Instant::now() + OUTAGE;
        let child = process.child_mut();
        let input = child.stdin.take().ok_or("outage_model has no stdin")?;
        let mut replies = BufReader::new(child.stdout.take().ok_or("outage_model has no stdout")?);
        let mut base_url = String::new();
        replies
            .read_line(&mut base_url)
            .map_err(|e| format!("reading outage_model's base URL: {e}"))?;
        let base_url = base_url.trim().to_owned();
        if !base_url.starts_with("http") {
            return Err(format!(
                "outage_model printed {base_url:?} instead of its base URL"
            ));
        }
        Ok(OutageModel {
            _process: process,
            input,
            replies,
            base_url,
            healed_at,
        })
    }

    pub(crate) fn counts(&mut self) -> Result<Counts, String> {
        writeln!(self.input, "count").map_err(|e| format!("asking outage_model: {e}"))?;
        let mut line = String::new();
        self.replies
            .read_line(&mut line)
            .map_err(|e| format!("reading outage_model: {e}"))?;
        let v: Value =
            serde_json::from_str(&line).map_err(|e| format!("outage_model printed {line:?}: {e}"))?;
        Ok(Counts {
            during: v["during"].as_u64().ok_or("no `during` count")?,
            after: v["after"].as_u64().ok_or("no `after` count")?,
        })
    }

    /// Sleeps until the outage is over: the scenario is the time it lasts.
    pub(crate) fn wait_for_recovery(&self) {
        std::thread::sleep(self.healed_at.saturating_duration_since(Instant::now()));
    }
}

/// The rows of one board's run, named `{prefix}outage.*`.
pub(crate) fn push_rows(
    results: &mut Results,
    prefix: &str,
    who: &str,
    during: &Counts,
    end: &Counts,
    recovered: Option<f64>,
    parked: u64,
) {
    let row = |id: &str, label: &str, unit: &str, value: f64| {
        Row::new(
            &format!("{prefix}outage.{id}"),
            &format!("{who}{label}"),
            unit,
            vec![value],
        )
    };
    results.rows.push(row(
        "requests",
        "outage: requests in 1 h, 100 cards",
        "requests",
        during.during as f64,
    ));
    results.rows.push(row(
        "parked",
        "outage: cards parked by it",
        "cards",
        parked as f64,
    ));
    results.rows.push(row(
        "after",
        "outage: requests once the model is back",
        "requests",
        end.after as f64,
    ));
    results.rows.push(
        row(
            "recovery",
            "outage: all cards decomposed after (compressed)",
            "s",
            recovered.unwrap_or(f64::NAN),
        )
        .goal("every card decomposed by itself", recovered.is_some()),
    );
}

/// Our gateway through the outage.
pub(super) fn ours(paths: &Paths, results: &mut Results) -> Result<(), String> {
    mkdir(&paths.work)?;
    let mut model = OutageModel::start(paths)?;
    let config = format!(
        "model:\n  base_url: {}\n  default: bench-model\n  api_key_env: KANBAN_BENCH_NO_KEY\n\
         kanban:\n  dispatch_interval_seconds: {TICK_SECONDS}\n  max_spawn: 0\n  decompose_retry_base_seconds: 1\n",
        model.base_url
    );
    let home = new_home(paths, "outage", &config)?;
    for card in 0..CARDS {
        output(Command::new(paths.kanban()).arg("--home").arg(&home).args([
            "create",
            &format!("rough idea {card}"),
            "--triage",
        ]))?;
    }
    let mut gateway = start_gateway(paths, &home)?;
    model.wait_for_recovery();
    let during = model.counts()?;
    let triage = |parked_only: bool| -> Result<u64, String> {
        let listed = json_line(&output(
            Command::new(paths.kanban())
                .arg("--home")
                .arg(&home)
                .args(["list", "--status", "triage", "--json"]),
        )?)?;
        let cards = listed.as_array().ok_or("kanban list --json printed no array")?;
        Ok(cards
            .iter()
            .filter(|c| !parked_only || c["decompose_parked"].as_bool() == Some(true))
            .count() as u64)
    };
    let parked = triage(true)?;
    let recovered = match wait_for(&mut gateway, RECOVERY_LIMIT, "every card decomposed", || {
        Ok(triage(false)? == 0)
    }) {
        Ok(()) => Some(model.healed_at.elapsed().as_secs_f64()),
        Err(e) if e.starts_with("timed out") => None,
        Err(e) => return Err(e),
    };
    let end = model.counts()?;
    push_rows(results, "", "", &during, &end, recovered, parked);
    Ok(())
}
