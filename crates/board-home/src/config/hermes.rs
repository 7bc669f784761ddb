//! A Hermes `config.yaml` read as ours: Hermes' forms of a value that mean "the default"
//! (`model: ""`, `model: some-name`, a blank `kanban.default_assignee`), the keys Hermes
//! writes that the board has no use for (named in one warning instead of one warning
//! each). The providers a Hermes user names are in `providers.rs`.

use yaml_rust2::yaml::Hash;
use yaml_rust2::Yaml;

/// Keys whose blank string means "the default" (Hermes writes `''` for "not chosen").
const BLANK_IS_DEFAULT: &[(&str, &str)] = &[
    ("model", "default"),
    ("model", "provider"),
    ("model", "base_url"),
    ("kanban", "default_assignee"),
    ("kanban", "orchestrator_profile"),
];

/// The top-level sections of a Hermes config (hermes-agent's `DEFAULT_CONFIG`) that the
/// board has no use for. `model`, `auxiliary` and `kanban` are shared, so their own
/// Hermes-only keys are listed below instead.
const HERMES_SECTIONS: &[&str] = &[
    "providers",
    "fallback_providers",
    "credential_pool_strategies",
    "toolsets",
    "max_concurrent_sessions",
    "max_live_sessions",
    "agent",
    "terminal",
    "web",
    "browser",
    "checkpoints",
    "context_file_max_chars",
    "file_read_max_chars",
    "mcp_discovery_timeout",
    "mcp",
    "tool_output",
    "tool_loop_guardrails",
    "compression",
    "prompt_caching",
    "openrouter",
    "bedrock",
    "display",
    "dashboard",
    "privacy",
    "tts",
    "stt",
    "voice",
    "human_delay",
    "context",
    "memory",
    "delegation",
    "prefill_messages_file",
    "goals",
    "moa",
    "skills",
    "curator",
    "honcho",
    "timezone",
    "slack",
    "discord",
    "whatsapp",
    "telegram",
    "mattermost",
    "matrix",
    "approvals",
    "command_allowlist",
    "quick_commands",
    "platform_hints",
    "hooks",
    "hooks_auto_accept",
    "personalities",
    "security",
    "cron",
    "code_execution",
    "tools",
    "logging",
    "model_catalog",
    "network",
    "streaming",
    "sessions",
    "onboarding",
    "updates",
    "lsp",
    "x_search",
    "secrets",
    "paste_collapse_threshold",
    "paste_collapse_threshold_fallback",
    "paste_collapse_char_threshold",
    "computer_use",
    "desktop",
    "vertex",
    "_config_version",
    "mcp_servers",
    "custom_providers",
    "platforms",
];

/// Hermes keys inside the sections the board shares with it (`gateway` too: Hermes' is
/// its messaging gateway's).
const HERMES_KEYS: &[&str] = &[
    "model.context_length",
    "kanban.dispatch_in_gateway",
    "gateway.delivery_ledger",
    "gateway.platform_connect_timeout",
    "gateway.write_sessions_json",
    "gateway.scale_to_zero",
    "gateway.restart_loop_guard",
    "gateway.respawn_storm",
    "gateway.message_timestamps",
    "gateway.max_inbound_media_bytes",
    "gateway.strict",
    "gateway.media_delivery_allow_dirs",
    "gateway.trust_recent_files",
    "gateway.trust_recent_files_seconds",
    "gateway.api_server",
];

/// Hermes' other side calls (`auxiliary.<task>`): none of them is the board's.
const HERMES_AUXILIARY_TASKS: &[&str] = &[
    "vision",
    "web_extract",
    "compression",
    "skills_hub",
    "approval",
    "mcp",
    "title_generation",
    "memory_query_rewrite",
    "tts_audio_tags",
    "profile_describer",
    "goal_judge",
    "curator",
    "monitor",
    "background_review",
    "moa_reference",
    "moa_aggregator",
];

/// Rewrites Hermes' forms into ours before the tree is read: `model: name` is
/// `model: {default: name}`, `model: ""` is no `model`, and a blank value of a key in
/// [`BLANK_IS_DEFAULT`] is no value.
pub fn normalize(root: &mut Yaml) {
    let Yaml::Hash(sections) = root else { return };
    let model = Yaml::String("model".to_owned());
    if let Some(Yaml::String(name)) = sections.get(&model) {
        let replacement = if name.trim().is_empty() {
            Yaml::Null
        } else {
            let mut hash = Hash::new();
            hash.insert(Yaml::String("default".to_owned()), Yaml::String(name.clone()));
            Yaml::Hash(hash)
        };
        sections.insert(model, replacement);
    }
    for (section, key) in BLANK_IS_DEFAULT {
        if let Some(Yaml::Hash(entries)) = sections.get_mut(&Yaml::String((*section).to_owned())) {
            let key = Yaml::String((*key).to_owned());
            if matches!(entries.get(&key), Some(Yaml::String(s)) if s.trim().is_empty()) {
                entries.remove(&key);
            }
        }
    }
}

/// Whether an unknown key (by its full path) is one Hermes writes.
pub fn is_hermes_key(path: &str) -> bool {
    if HERMES_SECTIONS.contains(&path) || HERMES_KEYS.contains(&path) {
        return true;
    }
    path.strip_prefix("auxiliary.")
        .is_some_and(|task| HERMES_AUXILIARY_TASKS.contains(&task))
}
