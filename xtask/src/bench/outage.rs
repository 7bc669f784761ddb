//! The outage cost: what provider outages of 1, 10 and 100 times the retry base cost
//! with 20 triage cards (requests during the outage, cards parked), and how soon the
//! cards are decomposed once the provider is back (the first, and every one). The two
//! sides of the breaker's probe cap: a longer cap costs fewer requests during a long
//! outage and waits longer after it.
//!
//! Time is compressed 30 times for both boards alike: the default 60 s tick (ours and
//! Hermes') is 2 s, and our default 30 s retry base is 1 s, so the outages are 30 s,
//! 5 min and 50 min of real time. The model (`fake-llm`'s `outage_model` example)
//! answers HTTP 500 from its start until the outage ends, then a two-step decomposition.
//! Each board runs with its defaults otherwise: three automatic decompositions per
//! tick, its own retries, our probe cap of ten bases. Ours runs a second time with the
//! probes doubling to an hour (the cap set to 1 h, compressed): the other side of the
//! trade.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::gateway::{new_home, start_gateway, wait_for, Running};
use super::{json_line, mkdir, output, Paths, Results, Row};

pub(crate) const CARDS: usize = 20;
/// Our default retry base (30 s), compressed.
const BASE_SECONDS: u64 = 1;
/// The outages, in retry bases, and their rows' names.
pub(crate) const OUTAGES: [(&str, u64); 3] = [("1x", 1), ("10x", 10), ("100x", 100)];
/// The default tick of both boards (60 s), compressed.
pub(crate) const TICK_SECONDS: u64 = 2;
/// How long after the outage the cards may take to be decomposed (1.5 h compressed).
pub(crate) const RECOVERY_LIMIT: Duration = Duration::from_secs(180);

/// An outage of `bases` retry bases.
pub(crate) fn outage_length(bases: u64) -> Duration {
    Duration::from_secs(bases * BASE_SECONDS)
}

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
    pub(crate) fn start(paths: &Paths, outage: Duration) -> Result<OutageModel, String> {
        let mut process = Running::spawn_keeping_stdin(
            Command::new(paths.examples.join("outage_model"))
                .args(["--outage-seconds", &outage.as_secs().to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )?;
        let healed_at = Instant::now() + outage;
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

/// What one board did through one outage.
pub(crate) struct Run {
    pub(crate) during: Counts,
    pub(crate) end: Counts,
    pub(crate) parked: u64,
    /// Seconds from the provider's return to the first card decomposed, and to every
    /// card decomposed; `None`: not within the limit.
    pub(crate) first: Option<f64>,
    pub(crate) all: Option<f64>,
}

/// The rows of one board's run through the outage `scale` (`1x`, ...), named
/// `{prefix}outage.{scale}.*`.
pub(crate) fn push_rows(results: &mut Results, prefix: &str, who: &str, scale: &str, run: &Run) {
    let row = |id: &str, label: &str, unit: &str, value: f64| {
        Row::new(
            &format!("{prefix}outage.{scale}.{id}"),
            &format!("{who}outage {scale} base: {label}"),
            unit,
            vec![value],
        )
    };
    let seconds = |s: Option<f64>| s.unwrap_or(f64::NAN);
    results.rows.push(row(
        "requests",
        &format!("requests during it, {CARDS} cards"),
        "requests",
        run.during.during as f64,
    ));
    results
        .rows
        .push(row("parked", "cards parked by it", "cards", run.parked as f64));
    results.rows.push(row(
        "after",
        "requests once the model is back",
        "requests",
        run.end.after as f64,
    ));
    results.rows.push(row(
        "first",
        "first card decomposed after (compressed)",
        "s",
        seconds(run.first),
    ));
    results.rows.push(
        row(
            "recovery",
            "all cards decomposed after (compressed)",
            "s",
            seconds(run.all),
        )
        .goal("every card decomposed by itself", run.all.is_some()),
    );
}

/// The probe cap of the other side of the trade: probes doubling to an hour (compressed
/// 30 times), as before the cap existed.
const UNCAPPED_PROBE_SECONDS: u64 = 120;

/// Our gateway through each outage: with the default probe cap, then with probes
/// doubling to the hour.
pub(super) fn ours(paths: &Paths, results: &mut Results) -> Result<(), String> {
    mkdir(&paths.work)?;
    for (scale, bases) in OUTAGES {
        let run = ours_through(paths, scale, outage_length(bases), None)?;
        push_rows(results, "", "", scale, &run);
    }
    for (scale, bases) in OUTAGES {
        let cap = Some(UNCAPPED_PROBE_SECONDS);
        let run = ours_through(paths, scale, outage_length(bases), cap)?;
        push_rows(results, "uncapped.", "probes to 1 h: ", scale, &run);
    }
    Ok(())
}

/// One outage; `probe_max` sets `kanban.decompose_probe_max_seconds`.
fn ours_through(paths: &Paths, scale: &str, outage: Duration, probe_max: Option<u64>) -> Result<Run, String> {
    let mut model = OutageModel::start(paths, outage)?;
    let cap = probe_max.map_or(String::new(), |s| format!("  decompose_probe_max_seconds: {s}\n"));
    let config = format!(
        "model:\n  base_url: {}\n  default: bench-model\n  api_key_env: KANBAN_BENCH_NO_KEY\n\
         kanban:\n  dispatch_interval_seconds: {TICK_SECONDS}\n  max_spawn: 0\n  decompose_retry_base_seconds: {BASE_SECONDS}\n{cap}",
        model.base_url
    );
    let name = format!(
        "outage-{scale}{}",
        if probe_max.is_some() { "-uncapped" } else { "" }
    );
    let home = new_home(paths, &name, &config)?;
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
    let mut first = None;
    let all = match wait_for(&mut gateway, RECOVERY_LIMIT, "every card decomposed", || {
        let left = triage(false)?;
        if left < CARDS as u64 && first.is_none() {
            first = Some(model.healed_at.elapsed().as_secs_f64());
        }
        Ok(left == 0)
    }) {
        Ok(()) => Some(model.healed_at.elapsed().as_secs_f64()),
        Err(e) if e.starts_with("timed out") => None,
        Err(e) => return Err(e),
    };
    let end = model.counts()?;
    Ok(Run {
        during,
        end,
        parked,
        first,
        all,
    })
}
