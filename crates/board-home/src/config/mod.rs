//! `<home>/config.yaml` (docs/config.md): every key declared once, as a field of a
//! serde-derived struct with its default beside it; loading the file into those structs
//! with errors that name the key's full path and warnings for unknown keys; the
//! effective values `kanban config check` prints and the template `kanban init` writes,
//! both rendered from the same structs.
//!
//! The YAML is parsed by `yaml-rust2` and handed to serde as a tree (`yaml.rs`);
//! `serde_path_to_error` names the key of a bad value and `serde_ignored` the unknown
//! keys. How each kind of value is read, with its wording, is in `fields.rs`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use board_core::plan::DEFAULT_MAX_CHILDREN;
use board_core::RetryPolicy;
use board_sqlite::Synchronous;
use decompose::endpoint::check_base_url;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use smart_default::SmartDefault;

use crate::CONFIG_FILE;

mod boards;
mod decomposer;
mod edit;
mod error;
mod fields;
mod gateway;
pub mod hermes;
mod lanes;
mod profile;
pub mod providers;
mod specifier;
mod template;
mod templates;
mod text;
mod yaml;

pub use boards::BoardConfig;
pub use edit::{as_yaml, set_key};
pub use error::{ConfigError, Warning};
pub use fields::parse_duration;
pub use gateway::GatewayConfig;
pub use lanes::LanesConfig;
use profile::{check_external, check_reviews};
pub use profile::{Contract, ProfileConfig, Review};
pub use specifier::SpecifierConfig;
pub use templates::{is_template_name, template, templates, TEMPLATES_DIR};
use text::{emit, read_file, yaml_root};

/// The implied profile every config has.
pub const DEFAULT_PROFILE: &str = "default";
const DEFAULT_PROFILE_DESCRIPTION: &str = "General-purpose worker";

/// A config is written by hand; anything bigger is a mistake, and a cap keeps a wrong
/// path (a log, a database) from being read whole.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Each alias is expanded by copying its anchor; a few are plenty for a config, and a cap
/// keeps nested aliases from expanding exponentially.
const MAX_ALIASES: usize = 16;

// Ceilings: values above them are typos, not intentions.
const MAX_RETRIES: i64 = 10;
const MAX_TIMEOUT_SECONDS: i64 = 24 * 3600;
const MAX_TOKENS: i64 = 1_000_000;
const MAX_DAILY_COUNT: i64 = 1_000_000_000_000;
const MAX_SPAWN: i64 = 1024;
const MAX_PER_TICK: i64 = 64;
const MAX_LOG_BYTES: i64 = 1 << 40;
const MAX_LOG_BACKUPS: i64 = 100;
const MAX_FAILURE_LIMIT: i64 = 100;
const MAX_RETRY_BASE_SECONDS: i64 = 7 * 24 * 3600;
const MAX_CLAIM_TTL_SECONDS: i64 = 7 * 24 * 3600;
/// The most claims one server lets wait at once (each holds a connection).
const MAX_WAITING_CLAIMS: i64 = 100_000;
/// No store keeps a longer text field, whatever the config says.
const MAX_TEXT_BYTES_CEILING: i64 = board_core::limits::TEXT_MAX_BYTES as i64;
const MAX_ATTACHMENT_BYTES_CEILING: i64 = board_core::attachments::HARD_MAX_BYTES as i64;
const MAX_CHILDREN: i64 = board_core::plan::MAX_CHILDREN_CEILING as i64;

/// The whole configuration, every key resolved to its value or default.
#[derive(Clone, Debug, PartialEq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// `model.*`: the OpenAI-compatible endpoint.
    pub model: ModelConfig,
    /// `auxiliary.*`: the side calls (the decomposer).
    pub auxiliary: AuxiliaryConfig,
    /// `kanban.*`: the board and its dispatcher.
    pub kanban: KanbanConfig,
    /// `database_url`: a PostgreSQL board (`postgres://user[:password]@host/db`) shared by
    /// every gateway and CLI that names it; `$KANBAN_DATABASE_URL` wins over the file.
    /// Unset: the home's `kanban.db`. Shown with its password redacted, only when set.
    #[serde(
        deserialize_with = "fields::database_url",
        serialize_with = "fields::redacted_database_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub database_url: Option<DatabaseUrl>,
    /// `gateway.*`: how the gateway process is run and watched, and its name among
    /// several gateways on one board.
    pub gateway: GatewayConfig,
    /// `lanes.*`: agents outside the gateway that claim work (docs/lanes.md).
    pub lanes: LanesConfig,
    /// `boards.<slug>.*`: a board's own `max_spawn` and decomposer (docs/boards.md).
    #[serde(deserialize_with = "boards::boards")]
    pub boards: BTreeMap<crate::BoardSlug, BoardConfig>,
    /// `profiles.*`: the kinds of worker; always holds [`DEFAULT_PROFILE`].
    #[default(fields::implied_profiles())]
    #[serde(deserialize_with = "fields::profiles")]
    pub profiles: BTreeMap<String, ProfileConfig>,
}

/// `model.*`.
#[derive(Clone, Debug, PartialEq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelConfig {
    /// `model.provider`.
    #[default = "custom"]
    #[serde(deserialize_with = "fields::non_empty")]
    pub provider: String,
    /// `model.base_url`.
    #[default(decompose::DEFAULT_BASE_URL.to_owned())]
    #[serde(deserialize_with = "fields::url", serialize_with = "fields::redacted_url")]
    pub base_url: String,
    /// `model.default`: the model name.
    #[default(decompose::DEFAULT_MODEL.to_owned())]
    #[serde(deserialize_with = "fields::non_empty")]
    pub default: String,
    /// `model.api_key_env`: the variable the key is read from when `model.api_key` is not
    /// set (empty: none).
    #[default(decompose::DEFAULT_API_KEY_ENV.to_owned())]
    pub api_key_env: String,
    /// The key: `model.api_key` if set, else the variable named by `api_key_env`, else none
    /// (a local server needs none).
    #[serde(deserialize_with = "fields::api_key", serialize_with = "fields::redacted_key")]
    pub api_key: Option<ApiKey>,
    /// `model.allow_insecure_http`: plain `http://` to a host other than this machine.
    #[serde(deserialize_with = "fields::flag")]
    pub allow_insecure_http: bool,
}

/// `auxiliary.*`.
#[derive(Clone, Debug, PartialEq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct AuxiliaryConfig {
    /// `auxiliary.transient_retries`: retries of a transient LLM failure.
    #[default(decompose::DEFAULT_TRANSIENT_RETRIES)]
    #[serde(deserialize_with = "fields::non_negative::<_, _, MAX_RETRIES>")]
    pub transient_retries: u32,
    /// `auxiliary.kanban_decomposer.*`.
    pub kanban_decomposer: DecomposerConfig,
    /// `auxiliary.triage_specifier.*`: the model `kanban specify` calls.
    pub triage_specifier: SpecifierConfig,
}

/// `auxiliary.kanban_decomposer.*`; read through [`Config::decomposer_model`] and its
/// siblings, which apply the fallbacks to `model.*`.
#[derive(Clone, Debug, PartialEq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct DecomposerConfig {
    /// Who serves the decomposer: `auto` (the model's endpoint), `custom`, or a hosted
    /// provider whose endpoint and key variable the name implies (`providers::PROVIDERS`).
    #[default = "auto"]
    pub provider: String,
    /// The decomposer's model; empty means `model.default`.
    pub model: String,
    /// The decomposer's endpoint; empty means `model.base_url`.
    #[serde(
        deserialize_with = "fields::url_or_empty",
        serialize_with = "fields::redacted_url"
    )]
    pub base_url: String,
    /// The decomposer's key: this, else the provider's variable, else the model's key.
    #[serde(deserialize_with = "fields::api_key", serialize_with = "fields::redacted_key")]
    pub api_key: Option<ApiKey>,
    /// Seconds one call may take.
    #[default(decompose::DEFAULT_TIMEOUT_SECONDS)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_TIMEOUT_SECONDS>")]
    pub timeout: u64,
    /// The reply's token budget.
    #[default(decompose::DEFAULT_MAX_TOKENS)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_TOKENS>")]
    pub max_tokens: u32,
    /// Requests in a rolling 24 h past which automatic decomposition stops.
    #[serde(deserialize_with = "fields::optional_count::<_, MAX_DAILY_COUNT>")]
    pub max_requests_per_day: Option<i64>,
    /// Tokens (in and out) in a rolling 24 h past which automatic decomposition stops.
    #[serde(deserialize_with = "fields::optional_count::<_, MAX_DAILY_COUNT>")]
    pub max_tokens_per_day: Option<i64>,
    /// Cost in a rolling 24 h past which automatic decomposition stops (needs prices).
    #[serde(deserialize_with = "fields::optional_amount")]
    pub max_cost_per_day: Option<f64>,
    /// The model's price per million input (prompt) tokens.
    #[serde(deserialize_with = "fields::optional_amount")]
    pub price_per_million_input: Option<f64>,
    /// The model's price per million output (completion) tokens.
    #[serde(deserialize_with = "fields::optional_amount")]
    pub price_per_million_output: Option<f64>,
    /// Fields added to every request body (Hermes' key), e.g. a provider's routing
    /// options; the fields the decomposer owns (`model`, `messages`, ...) are refused.
    #[serde(deserialize_with = "decomposer::extra_body")]
    pub extra_body: BTreeMap<String, serde_json::Value>,
    /// The request's `reasoning_effort` (Hermes' key and words); empty: the provider's.
    #[serde(deserialize_with = "decomposer::reasoning_effort")]
    pub reasoning_effort: String,
}

/// `kanban.*`.
#[derive(Clone, Debug, PartialEq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct KanbanConfig {
    /// Seconds between ticks, fractional allowed, > 0.
    #[default = 60.0]
    #[serde(
        deserialize_with = "fields::seconds",
        serialize_with = "fields::whole_seconds"
    )]
    pub dispatch_interval_seconds: f64,
    /// Workers running at once; 0 never spawns.
    #[default = 4]
    #[serde(deserialize_with = "fields::non_negative::<_, _, MAX_SPAWN>")]
    pub max_spawn: usize,
    /// Workers of one profile running at once (Hermes' key), for every profile without
    /// its own `max_concurrent`; unset: only `max_spawn` bounds them.
    #[serde(deserialize_with = "fields::optional_positive::<_, MAX_SPAWN>")]
    pub max_in_progress_per_profile: Option<usize>,
    /// A worker's log (`logs/ID.log`) longer than this when a worker starts is rotated
    /// first (Hermes' key; 2 MiB).
    #[default(2 * 1024 * 1024)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_LOG_BYTES>")]
    pub worker_log_rotate_bytes: u64,
    /// Rotated logs kept (`ID.log.1` the newest); 0 keeps none.
    #[default = 1]
    #[serde(deserialize_with = "fields::non_negative::<_, _, MAX_LOG_BACKUPS>")]
    pub worker_log_backup_count: u32,
    /// A worker running this many seconds with no heartbeat for an hour is stopped and
    /// its run ends `stale` (Hermes' key); 0 turns the rule off.
    #[serde(deserialize_with = "fields::non_negative::<_, _, MAX_CLAIM_TTL_SECONDS>")]
    pub dispatch_stale_timeout_seconds: i64,
    /// Decompose triage cards automatically.
    #[default = true]
    #[serde(deserialize_with = "fields::flag")]
    pub auto_decompose: bool,
    /// New automatic decompositions per tick.
    #[default = 3]
    #[serde(deserialize_with = "fields::non_negative::<_, _, MAX_PER_TICK>")]
    pub auto_decompose_per_tick: usize,
    /// Automatic decompositions in flight.
    #[default = 2]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_PER_TICK>")]
    pub auto_decompose_concurrency: usize,
    /// Promote `todo` children whose parents are done.
    #[default = true]
    #[serde(deserialize_with = "fields::flag")]
    pub auto_promote_children: bool,
    /// The child cap of one decomposition.
    #[default(DEFAULT_MAX_CHILDREN)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_CHILDREN>")]
    pub decompose_max_children: usize,
    /// Failed automatic decompositions before a card is parked.
    #[default(RetryPolicy::default().failure_limit)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_FAILURE_LIMIT>")]
    pub decompose_failure_limit: i64,
    /// The first retry delay of a failed decomposition, doubled each time.
    #[default(RetryPolicy::default().base_seconds)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_RETRY_BASE_SECONDS>")]
    pub decompose_retry_base_seconds: i64,
    /// The longest wait between the provider breaker's probes while it is open
    /// (seconds, or a duration such as `5m`; an hour at most); unset: ten times
    /// `decompose_retry_base_seconds`.
    #[serde(deserialize_with = "fields::optional_age")]
    pub decompose_probe_max_seconds: Option<i64>,
    /// The assignee of a task created without one.
    #[default(DEFAULT_PROFILE.to_owned())]
    #[serde(deserialize_with = "fields::non_empty")]
    pub default_assignee: String,
    /// The profile that decomposes.
    #[default(DEFAULT_PROFILE.to_owned())]
    #[serde(deserialize_with = "fields::non_empty")]
    pub orchestrator_profile: String,
    /// Failed runs before a task is blocked.
    #[default = 2]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_FAILURE_LIMIT>")]
    pub failure_limit: i64,
    /// Failed verifications of a task's reported work before it is blocked.
    #[default = 3]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_FAILURE_LIMIT>")]
    pub verify_failure_limit: i64,
    /// The longest one verifier runs, in seconds, before it is killed and counts as
    /// failed.
    #[default = 600]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_CLAIM_TTL_SECONDS>")]
    pub verify_timeout_seconds: i64,
    /// Rounds of changes a reviewer may request before the task is blocked as a review
    /// loop (`review_loop_detected`).
    #[default = 3]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_FAILURE_LIMIT>")]
    pub review_round_limit: i64,
    /// A claim's lease in seconds.
    #[default = 900]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_CLAIM_TTL_SECONDS>")]
    pub claim_ttl_seconds: i64,
    /// `PRAGMA synchronous` of the board (`full` or `normal`).
    #[default(Synchronous::Full)]
    #[serde(
        deserialize_with = "fields::synchronous",
        serialize_with = "fields::synchronous_name"
    )]
    pub sqlite_synchronous: Synchronous,
    /// The largest body, result or comment in bytes.
    #[default(1024 * 1024)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_TEXT_BYTES_CEILING>")]
    pub max_text_bytes: usize,
    /// The largest file `kanban attach` takes, in bytes (Hermes' 25 MB).
    #[default(board_core::attachments::DEFAULT_MAX_BYTES as usize)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_ATTACHMENT_BYTES_CEILING>")]
    pub attachment_max_bytes: usize,
    /// `kanban gc` removes archived tasks last changed longer ago than this (seconds,
    /// or a duration such as `90d`); unset: `gc` keeps them unless asked.
    #[serde(deserialize_with = "fields::optional_age")]
    pub gc_archived_older_than: Option<i64>,
    /// `kanban gc` removes the routine events of done tasks older than this; unset:
    /// kept unless asked.
    #[serde(deserialize_with = "fields::optional_age")]
    pub gc_events_older_than: Option<i64>,
}

/// A PostgreSQL board's URL. It may hold a password, so it never prints itself whole:
/// `Debug` and `Display` show it redacted; [`DatabaseUrl::expose`] is for connecting.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: String) -> DatabaseUrl {
        DatabaseUrl(url)
    }

    /// The URL itself, password and all.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&board_postgres::redact_url(&self.0))
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// The variable that names a PostgreSQL board, winning over `database_url`.
pub const DATABASE_URL_VARIABLE: &str = "KANBAN_DATABASE_URL";

/// The model API key: the decomposer's type, which never prints itself.
pub use decompose::ApiKey;

/// A loaded config and what was odd about it without being wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The effective configuration.
    pub config: Config,
    /// Things to tell the user (one line each), in file order.
    pub warnings: Vec<Warning>,
}

/// A body, result or comment over `kanban.max_text_bytes`, with the message every reader
/// of the cap shows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} is over the {cap}-byte limit (kanban.max_text_bytes); shorten it or raise the limit")]
pub struct TextTooLong {
    pub what: String,
    pub cap: usize,
}

/// Refuses a body, result or comment of more than `cap` bytes (`kanban.max_text_bytes`).
pub fn text_within_cap(what: &str, bytes: usize, cap: usize) -> Result<(), TextTooLong> {
    if bytes <= cap {
        return Ok(());
    }
    Err(TextTooLong {
        what: what.to_owned(),
        cap,
    })
}

/// How an environment variable is read; tests pass their own instead of touching the process's.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl KanbanConfig {
    /// `dispatch_interval_seconds` as a duration, never zero.
    pub fn dispatch_interval(&self) -> Duration {
        // A loaded value is finite, > 0 and capped; the fields are public, though, and a
        // timer of zero (or a panic on a negative) must not follow from a hand-built one.
        Duration::try_from_secs_f64(self.dispatch_interval_seconds)
            .unwrap_or(Duration::ZERO)
            .max(Duration::from_millis(1))
    }
}

impl Config {
    /// `<home>/config.yaml`.
    pub fn path(home: &Path) -> PathBuf {
        home.join(CONFIG_FILE)
    }

    /// Loads `<home>/config.yaml`, reading the API key's variable from the process's
    /// environment. A missing file is every default.
    pub fn load(home: &Path) -> Result<Loaded, ConfigError> {
        Config::load_with_env(home, &|name| std::env::var(name).ok())
    }

    /// [`Config::load`] with the environment given.
    pub fn load_with_env(home: &Path, env: EnvLookup<'_>) -> Result<Loaded, ConfigError> {
        let Some((text, meta)) = read_file(&Config::path(home))? else {
            return Config::parse("", env);
        };
        let (mut loaded, key_in_file) = Config::parse_text(&text, env)?;
        if key_in_file && readable_by_others(home, &meta) {
            loaded.warnings.push(Warning::KeyReadable(Config::path(home)));
        }
        Ok(loaded)
    }

    /// Parses the text of a config; empty text is every default.
    pub fn parse(text: &str, env: EnvLookup<'_>) -> Result<Loaded, ConfigError> {
        Config::parse_text(text, env).map(|(loaded, _)| loaded)
    }

    /// [`Config::parse`], and whether the text itself holds the API key.
    fn parse_text(text: &str, env: EnvLookup<'_>) -> Result<(Loaded, bool), ConfigError> {
        let mut root = yaml_root(text)?;
        hermes::normalize(&mut root);
        let mut unknown_paths = Vec::new();
        let node = yaml::Node {
            value: &root,
            root: true,
        };
        let mut unknown = |path: serde_ignored::Path<'_>| unknown_paths.push(path.to_string());
        let mut config: Config =
            serde_path_to_error::deserialize(serde_ignored::Deserializer::new(node, &mut unknown)).map_err(
                |e| {
                    let key = e.path().to_string();
                    let problem = e.into_inner().to_string();
                    if key == "." {
                        ConfigError::Shape(problem)
                    } else {
                        ConfigError::Invalid { key, problem }
                    }
                },
            )?;
        providers::apply(&root, &mut config)?;
        check_endpoints(&config)?;
        check_reviews(&config)?;
        check_external(&config)?;
        if let Some(url) = env(DATABASE_URL_VARIABLE).filter(|v| !v.is_empty()) {
            fields::check_database_url(&url)
                .map_err(|problem| ConfigError::invalid(DATABASE_URL_VARIABLE, problem.to_string()))?;
            config.database_url = Some(DatabaseUrl::new(url));
        }
        let (hermes_keys, unknown_keys): (Vec<_>, Vec<_>) = unknown_paths
            .into_iter()
            .partition(|path| hermes::is_hermes_key(path));
        let mut warnings: Vec<Warning> = unknown_keys.into_iter().map(Warning::UnknownKey).collect();
        if !hermes_keys.is_empty() {
            warnings.push(Warning::HermesKeys(hermes_keys));
        }
        let key_in_file =
            config.model.api_key.is_some() || config.auxiliary.kanban_decomposer.api_key.is_some();
        let decomposer = &mut config.auxiliary.kanban_decomposer;
        if decomposer.api_key.is_none() {
            let var = providers::provider(&decomposer.provider).and_then(|p| p.api_key_env);
            decomposer.api_key = var.and_then(env).filter(|v| !v.is_empty()).map(ApiKey::new);
        }
        if config.model.api_key.is_none() {
            let var = config.model.api_key_env.as_str();
            config.model.api_key = (!var.is_empty())
                .then(|| env(var))
                .flatten()
                .filter(|v| !v.is_empty())
                .map(ApiKey::new);
        }
        Ok((Loaded { config, warnings }, key_in_file))
    }

    /// The decomposer's model: `auxiliary.kanban_decomposer.model`, else `model.default`.
    pub fn decomposer_model(&self) -> &str {
        or_fallback(&self.auxiliary.kanban_decomposer.model, &self.model.default)
    }

    /// The decomposer's endpoint: `auxiliary.kanban_decomposer.base_url`, else its
    /// provider's, else `model.base_url`.
    pub fn decomposer_base_url(&self) -> &str {
        let decomposer = &self.auxiliary.kanban_decomposer;
        let provider_url = providers::provider(&decomposer.provider).and_then(|p| p.base_url);
        or_fallback(&decomposer.base_url, provider_url.unwrap_or(&self.model.base_url))
    }

    /// The decomposer's key: `auxiliary.kanban_decomposer.api_key`, else its provider's
    /// variable, else the model's key.
    pub fn decomposer_api_key(&self) -> Option<&ApiKey> {
        let decomposer = &self.auxiliary.kanban_decomposer;
        decomposer.api_key.as_ref().or(self.model.api_key.as_ref())
    }

    /// How long one decomposer call may take.
    pub fn decomposer_timeout(&self) -> Duration {
        Duration::from_secs(self.auxiliary.kanban_decomposer.timeout)
    }

    /// The decomposer reply's token budget.
    pub fn decomposer_max_tokens(&self) -> u32 {
        self.auxiliary.kanban_decomposer.max_tokens
    }

    /// A profile by name.
    pub fn profile(&self, name: &str) -> Option<&ProfileConfig> {
        self.profiles.get(name)
    }

    /// The effective values as JSON, in the file's shape, the API key shown as
    /// `"[redacted]"` when there is one and `null` when there is none, and the base URLs
    /// with their credentials (`user:pass@`, query values) redacted.
    pub fn effective_json(&self) -> Value {
        // The structs hold strings, numbers, lists and maps only: nothing JSON refuses.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The effective values as YAML (the same tree as [`Config::effective_json`]), which
    /// parses back to this config (the key and the URLs' credentials aside).
    pub fn effective_yaml(&self) -> String {
        emit(&self.effective_json())
    }

    /// What `kanban init` writes: every default, commented.
    pub fn template() -> String {
        template::render(&Config::default().effective_json())
    }
}

/// Whether a user other than the owner can read the config: the file grants them read
/// and the home lets them reach it.
fn readable_by_others(home: &Path, file: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let home = std::fs::metadata(home).map_or(0o777, |m| m.permissions().mode());
    let file = file.permissions().mode();
    (home & 0o010 != 0 && file & 0o040 != 0) || (home & 0o001 != 0 && file & 0o004 != 0)
}

fn or_fallback<'a>(value: &'a str, fallback: &'a str) -> &'a str {
    if value.is_empty() {
        fallback
    } else {
        value
    }
}

fn check_endpoints(config: &Config) -> Result<(), ConfigError> {
    let allow = config.model.allow_insecure_http;
    let endpoints = [
        ("model.base_url", config.model.base_url.as_str()),
        (
            "auxiliary.kanban_decomposer.base_url",
            config.auxiliary.kanban_decomposer.base_url.as_str(),
        ),
    ];
    for (key, endpoint) in endpoints {
        if !endpoint.is_empty() {
            check_base_url(endpoint, allow).map_err(|e| ConfigError::invalid(key, e.to_string()))?;
        }
    }
    Ok(())
}
