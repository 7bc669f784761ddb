//! The template `kanban init` writes: the default config as its effective values are
//! rendered, so it can never disagree with the defaults, with a note after some keys.

use serde_json::Value;

use super::emit;

const HEADER: &str = "\
# kanban configuration. Every key is optional; the values below are the defaults.
# Keys follow the Hermes config so an existing Hermes user recognises them.
";

const FOOTER: &str = "
# Profiles are the kinds of worker the dispatcher can spawn. `default` always exists
# (without a command unless you give it one). For example:
#
# profiles:
#   coder:
#     description: Writes code
#     command: [\"my-agent\", \"--task\", \"{task_id}\"]
#     user: kanban-worker   # optional: its workers run as this user (a root gateway)
#   reviewer-bot:
#     external: true        # served by lanes (kanban lane create), never spawned
#
# A board on PostgreSQL, shared by the gateways of several machines (each names itself
# with gateway.host_id, by default its hostname); KANBAN_DATABASE_URL works too:
#
# database_url: postgres://kanban@db.internal:5432/boards
# gateway:
#   host_id: build-01
#
# A board of the home (kanban boards create ops) may run fewer workers, or decompose
# through a provider of its own:
#
# boards:
#   ops:
#     max_spawn: 2
#     decomposer:
#       provider: openrouter
#       model: anthropic/claude-haiku
";

/// A note for the key at a path; a test checks every path is a key of the config.
pub const NOTES: &[(&str, &str)] = &[
    ("model", "the OpenAI-compatible endpoint"),
    (
        "model.provider",
        "custom: base_url; a named one (openrouter...) implies both",
    ),
    ("model.default", "model name"),
    (
        "model.api_key_env",
        "`api_key:` works too, but workers run as your user and could read it here",
    ),
    (
        "model.allow_insecure_http",
        "plain http:// to another machine sends the key in clear",
    ),
    (
        "auxiliary.kanban_decomposer",
        "each key overrides model.* for the decomposer",
    ),
    (
        "auxiliary.kanban_decomposer.provider",
        "auto (the model's), or a provider name as model.provider",
    ),
    (
        "auxiliary.kanban_decomposer.max_requests_per_day",
        "rolling 24 h ceiling; ~ is none",
    ),
    (
        "auxiliary.kanban_decomposer.max_tokens_per_day",
        "tokens in and out",
    ),
    (
        "auxiliary.kanban_decomposer.max_cost_per_day",
        "needs the prices below",
    ),
    (
        "auxiliary.kanban_decomposer.price_per_million_input",
        "for each call's cost",
    ),
    (
        "auxiliary.triage_specifier",
        "the model kanban specify calls; empty keys are the decomposer's",
    ),
    ("kanban.dispatch_interval_seconds", "the tick; fractions allowed"),
    (
        "kanban.decompose_probe_max_seconds",
        "longest wait between outage probes, e.g. 5m; ~ is 10 x the base",
    ),
    ("kanban.max_spawn", "workers running at once; 0 never spawns"),
    (
        "kanban.max_in_progress_per_profile",
        "per profile, unless it has max_concurrent; ~ is none",
    ),
    ("kanban.worker_log_rotate_bytes", "rotated when a worker starts"),
    (
        "kanban.dispatch_stale_timeout_seconds",
        "running this long, silent an hour: stale; 0 off",
    ),
    ("kanban.sqlite_synchronous", "or normal"),
    ("kanban.max_text_bytes", "the largest body, result or comment"),
    (
        "kanban.attachment_max_bytes",
        "the largest file kanban attach takes",
    ),
    (
        "kanban.gc_archived_older_than",
        "kanban gc removes older archived tasks, e.g. 90d; ~ keeps them",
    ),
    (
        "kanban.gc_events_older_than",
        "and older routine events of done tasks, e.g. 30d",
    ),
    (
        "gateway.metrics_bind",
        "/healthz and /metrics, e.g. 127.0.0.1:9464; empty: off",
    ),
    (
        "gateway.notify_timeout_seconds",
        "how long a webhook has to answer",
    ),
    (
        "gateway.boards",
        "the boards this gateway serves, e.g. [default, ops]; empty: every board",
    ),
    ("boards", "a board's own max_spawn and decomposer (see below)"),
    ("lanes.max_held", "tasks one lane holds at once"),
    (
        "lanes.lease_seconds",
        "a lane's claim lapses unless it heartbeats",
    ),
    (
        "lanes.max_waiting",
        "claims kanban serve lets wait at once (a connection each)",
    ),
];

/// Optional keys the template shows unset (`~`), so a reader finds them: the spend
/// ceilings and the prices. Other unset keys fall back to another and are left out.
const SHOWN_UNSET: &[&str] = &[
    "max_requests_per_day",
    "max_tokens_per_day",
    "max_cost_per_day",
    "price_per_million_input",
    "price_per_million_output",
];

/// Where the notes start, so they line up.
const NOTE_COLUMN: usize = 32;

/// The template for these default values. A secret left unset (`model.api_key`) is not
/// written: a key belongs in the variable `model.api_key_env` names.
pub fn render(defaults: &Value) -> String {
    let mut defaults = defaults.clone();
    for section in [
        "/model",
        "/auxiliary/kanban_decomposer",
        "/auxiliary/triage_specifier",
    ] {
        if let Some(keys) = defaults.pointer_mut(section).and_then(Value::as_object_mut) {
            keys.retain(|name, value| !value.is_null() || SHOWN_UNSET.contains(&name.as_str()));
        }
    }
    let mut out = String::from(HEADER);
    let mut path: Vec<String> = Vec::new();
    for line in emit(&defaults).lines() {
        let depth = (line.len() - line.trim_start().len()) / 2;
        let Some((key, _)) = line.trim_start().split_once(':') else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        path.truncate(depth);
        path.push(key.to_owned());
        if depth == 0 {
            out.push('\n');
        }
        out.push_str(line);
        if let Some((_, note)) = NOTES.iter().find(|(at, _)| *at == path.join(".")) {
            let pad = NOTE_COLUMN.saturating_sub(line.len()).max(1);
            out.push_str(&format!("{:pad$}# {note}", ""));
        }
        out.push('\n');
    }
    out.push_str(FOOTER);
    out
}

#[cfg(test)]
mod tests {
    use super::NOTES;
    use crate::Config;

    #[test]
    fn every_note_is_on_a_declared_key() {
        let defaults = Config::default().effective_json();
        for (path, _) in NOTES {
            let found = path.split('.').try_fold(&defaults, |value, key| value.get(key));
            assert!(found.is_some(), "{path} is not a key of the config");
        }
    }
}
