//! `<home>/config.yaml` (docs/config.md): loading it into typed values with every default,
//! validating each key with an error that names its full path, warning about unknown keys,
//! and rendering the effective values for `kanban config check`.
//!
//! The file is parsed into a YAML value tree (`yaml-rust2`) and walked by hand rather than
//! deserialized with serde: the walk knows the path of every key, so an unknown key
//! anywhere becomes a warning and a bad value an error naming exactly where it is.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use board_sqlite::Synchronous;
use decompose::endpoint::{check_base_url, redact_url};
use serde_json::{json, Map, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

use crate::CONFIG_FILE;

mod decomposer;

/// What `kanban init` writes: the SPEC 8 defaults, commented. A test checks that it
/// parses to exactly [`Config::default`].
pub const TEMPLATE: &str = r#"# kanban configuration. Every key is optional; the values below are the defaults.
# Keys follow the Hermes config so an existing Hermes user recognises them.

model:                          # the OpenAI-compatible endpoint
  provider: custom
  base_url: http://127.0.0.1:11434/v1
  default: llama3.1             # model name
  # The key is read from this variable; leave it empty for a local server. `api_key:`
  # in this file works too, but workers run as your user and could read it here.
  api_key_env: OPENAI_API_KEY
  allow_insecure_http: false    # plain http:// to another machine sends the key in clear

auxiliary:
  transient_retries: 2
  kanban_decomposer:            # each key overrides model.* for the decomposer
    model: ""
    base_url: ""
    timeout: 180
    max_tokens: 4000

kanban:
  dispatch_interval_seconds: 60
  max_spawn: 4
  auto_decompose: true
  auto_decompose_per_tick: 3
  auto_decompose_concurrency: 2
  auto_promote_children: true
  decompose_max_children: 16
  decompose_failure_limit: 3
  decompose_retry_base_seconds: 30
  default_assignee: default
  orchestrator_profile: default
  failure_limit: 2
  claim_ttl_seconds: 900
  sqlite_synchronous: full      # or normal
  max_text_bytes: 1048576       # the largest body, result or comment

# Profiles are the kinds of worker the dispatcher can spawn. `default` always exists
# (without a command unless you give it one). For example:
#
# profiles:
#   default:
#     description: General-purpose worker
#     command: ["my-agent", "--task", "{task_id}"]
"#;

/// The implied profile every config has.
pub const DEFAULT_PROFILE: &str = "default";
const DEFAULT_PROFILE_DESCRIPTION: &str = "General-purpose worker";

/// A config is written by hand; anything bigger is a mistake, and a cap keeps a wrong
/// path (a log, a database) from being read whole.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Each alias is expanded by copying its anchor; a few are plenty for a config, and a cap
/// keeps nested aliases from expanding exponentially.
const MAX_ALIASES: usize = 16;

// The keys each section knows; every other key is a warning.
const SECTIONS: &[&str] = &["model", "auxiliary", "kanban", "profiles"];
const MODEL_KEYS: &[&str] = &[
    "provider",
    "base_url",
    "default",
    "api_key_env",
    "api_key",
    "allow_insecure_http",
];
const AUXILIARY_KEYS: &[&str] = &["transient_retries", "kanban_decomposer"];
const DECOMPOSER_KEYS: &[&str] = &["model", "base_url", "timeout", "max_tokens"];
const KANBAN_KEYS: &[&str] = &[
    "dispatch_interval_seconds",
    "max_spawn",
    "auto_decompose",
    "auto_decompose_per_tick",
    "auto_decompose_concurrency",
    "auto_promote_children",
    "decompose_max_children",
    "decompose_failure_limit",
    "decompose_retry_base_seconds",
    "default_assignee",
    "orchestrator_profile",
    "failure_limit",
    "claim_ttl_seconds",
    "sqlite_synchronous",
    "max_text_bytes",
];
const PROFILE_KEYS: &[&str] = &["description", "command", "env_allow", "allow_dash_arguments"];
/// Programs whose `-c` argument is code: card text must never be spliced into it.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox",
];

// Ceilings: values above them are typos, not intentions.
const MAX_RETRIES: i64 = 10;
const MAX_TIMEOUT_SECONDS: i64 = 24 * 3600;
const MAX_TOKENS: i64 = 1_000_000;
const MAX_INTERVAL_SECONDS: f64 = 24.0 * 3600.0;
const MAX_SPAWN: i64 = 1024;
const MAX_PER_TICK: i64 = 64;
const MAX_FAILURE_LIMIT: i64 = 100;
const MAX_RETRY_BASE_SECONDS: i64 = 7 * 24 * 3600;
const MAX_CLAIM_TTL_SECONDS: i64 = 7 * 24 * 3600;
const MAX_TEXT_BYTES_CEILING: i64 = 64 * 1024 * 1024;

/// The whole configuration, every key resolved to its value or default.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `model.*`: the OpenAI-compatible endpoint.
    pub model: ModelConfig,
    /// `auxiliary.*`: the side calls (the decomposer).
    pub auxiliary: AuxiliaryConfig,
    /// `kanban.*`: the board and its dispatcher.
    pub kanban: KanbanConfig,
    /// `profiles.*`: the kinds of worker; always holds [`DEFAULT_PROFILE`].
    pub profiles: BTreeMap<String, ProfileConfig>,
}

/// `model.*`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// `model.provider` (default `custom`).
    pub provider: String,
    /// `model.base_url` (default `http://127.0.0.1:11434/v1`).
    pub base_url: String,
    /// `model.default`: the model name (default `llama3.1`).
    pub default: String,
    /// `model.api_key_env`: the variable the key is read from when `model.api_key` is not
    /// set (default `OPENAI_API_KEY`; empty: none).
    pub api_key_env: String,
    /// The key: `model.api_key` if set, else the variable named by `api_key_env`, else none
    /// (a local server needs none).
    pub api_key: Option<ApiKey>,
    /// `model.allow_insecure_http`: plain `http://` to a host other than this machine
    /// (default false).
    pub allow_insecure_http: bool,
}

/// `auxiliary.*`.
#[derive(Clone, Debug, PartialEq)]
pub struct AuxiliaryConfig {
    /// `auxiliary.transient_retries`: retries of a transient LLM failure (default 2).
    pub transient_retries: u32,
    /// `auxiliary.kanban_decomposer.*`.
    pub kanban_decomposer: DecomposerConfig,
}

/// `auxiliary.kanban_decomposer.*`; read through [`Config::decomposer_model`] and its
/// siblings, which apply the fallbacks to `model.*`.
#[derive(Clone, Debug, PartialEq)]
pub struct DecomposerConfig {
    /// The decomposer's model; empty means `model.default`.
    pub model: String,
    /// The decomposer's endpoint; empty means `model.base_url`.
    pub base_url: String,
    /// Seconds one call may take (default 180).
    pub timeout: u64,
    /// The reply's token budget (default 4000).
    pub max_tokens: u32,
}

/// `kanban.*`.
#[derive(Clone, Debug, PartialEq)]
pub struct KanbanConfig {
    /// Seconds between ticks, fractional allowed, > 0 (default 60).
    pub dispatch_interval_seconds: f64,
    /// Workers running at once; 0 never spawns (default 4).
    pub max_spawn: usize,
    /// Decompose triage cards automatically (default true).
    pub auto_decompose: bool,
    /// New automatic decompositions per tick (default 3).
    pub auto_decompose_per_tick: usize,
    /// Automatic decompositions in flight (default 2).
    pub auto_decompose_concurrency: usize,
    /// Promote `todo` children whose parents are done (default true).
    pub auto_promote_children: bool,
    /// The child cap of one decomposition, at most 64 (default 16).
    pub decompose_max_children: usize,
    /// Failed automatic decompositions before a card is parked (default 3).
    pub decompose_failure_limit: i64,
    /// The first retry delay of a failed decomposition, doubled each time (default 30).
    pub decompose_retry_base_seconds: i64,
    /// The assignee of a task created without one (default `default`).
    pub default_assignee: String,
    /// The profile that decomposes (default `default`).
    pub orchestrator_profile: String,
    /// Failed runs before a task is blocked (default 2).
    pub failure_limit: i64,
    /// A claim's lease in seconds (default 900).
    pub claim_ttl_seconds: i64,
    /// `PRAGMA synchronous` of the board (`full`, the default, or `normal`).
    pub sqlite_synchronous: Synchronous,
    /// The largest body, result or comment in bytes (default 1 MiB).
    pub max_text_bytes: usize,
}

/// `profiles.<name>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileConfig {
    /// What the profile is for, shown to the decomposer.
    pub description: String,
    /// The worker's argv; `None` makes the profile command-less (never spawned).
    pub command: Option<Vec<String>>,
    /// Variables passed to its workers although their names look secret (`*_KEY`,
    /// `*_TOKEN`, ...); the model key's variable never is.
    pub env_allow: Vec<String>,
    /// Card text may start an argument with `-` (default false: such a spawn is refused).
    pub allow_dash_arguments: bool,
}

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

/// Something in the file that is ignored rather than refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A key this version does not know, by its full path (`kanban.max_spwn`).
    UnknownKey(String),
    /// `model.api_key` is in a file that other users can read.
    KeyReadable(PathBuf),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnknownKey(path) => write!(f, "{CONFIG_FILE}: unknown key {path} (ignored)"),
            Warning::KeyReadable(path) => write!(
                f,
                "{CONFIG_FILE}: model.api_key is readable by other users: run chmod 600 {}, \
                 or better move the key to the variable named by model.api_key_env",
                path.display()
            ),
        }
    }
}

/// Why a config could not be used. Its `Display` is one line naming the file and, for a
/// bad value, the key's full path.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{}: cannot read the config: {source}", path.display())]
    Read {
        /// The config's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The path is a directory, a FIFO or another thing that is not a regular file.
    #[error("{}: the config is {what}, not a file", path.display())]
    NotAFile {
        /// The config's path.
        path: PathBuf,
        /// `a directory`, or `not a regular file`.
        what: &'static str,
    },
    /// The file is bigger than any hand-written config.
    #[error("{CONFIG_FILE}: {bytes} bytes is too big for a config (at most {MAX_FILE_BYTES})")]
    TooBig {
        /// Its size.
        bytes: u64,
    },
    /// The bytes are not UTF-8.
    #[error("{CONFIG_FILE}: not valid UTF-8 (line {line})")]
    NotUtf8 {
        /// The 1-based line of the first bad byte.
        line: usize,
    },
    /// The text is not YAML.
    #[error("{CONFIG_FILE}: YAML syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// The YAML is well formed but not shaped like a config (several documents, a list
    /// at the top, too many aliases).
    #[error("{CONFIG_FILE}: {0}")]
    Shape(String),
    /// A key holds a value it cannot have.
    #[error("{CONFIG_FILE}: {key}: {problem}")]
    Invalid {
        /// The key's full path, `kanban.max_spawn`, `profiles.coder.command`.
        key: String,
        /// What was wrong.
        problem: String,
    },
}

impl ConfigError {
    fn invalid(key: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_owned(),
            problem: problem.into(),
        }
    }
}

/// How an environment variable is read; tests pass their own instead of touching the process's.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Default for Config {
    fn default() -> Config {
        let mut profiles = BTreeMap::new();
        profiles.insert(DEFAULT_PROFILE.to_owned(), ProfileConfig::implied_default());
        Config {
            model: ModelConfig {
                provider: "custom".to_owned(),
                base_url: "http://127.0.0.1:11434/v1".to_owned(),
                default: "llama3.1".to_owned(),
                api_key_env: "OPENAI_API_KEY".to_owned(),
                api_key: None,
                allow_insecure_http: false,
            },
            auxiliary: AuxiliaryConfig {
                transient_retries: 2,
                kanban_decomposer: DecomposerConfig {
                    model: String::new(),
                    base_url: String::new(),
                    timeout: 180,
                    max_tokens: 4000,
                },
            },
            kanban: KanbanConfig {
                dispatch_interval_seconds: 60.0,
                max_spawn: 4,
                auto_decompose: true,
                auto_decompose_per_tick: 3,
                auto_decompose_concurrency: 2,
                auto_promote_children: true,
                decompose_max_children: board_core::plan::DEFAULT_MAX_CHILDREN,
                decompose_failure_limit: 3,
                decompose_retry_base_seconds: 30,
                default_assignee: DEFAULT_PROFILE.to_owned(),
                orchestrator_profile: DEFAULT_PROFILE.to_owned(),
                failure_limit: 2,
                claim_ttl_seconds: 900,
                sqlite_synchronous: Synchronous::Full,
                max_text_bytes: 1024 * 1024,
            },
            profiles,
        }
    }
}

impl ProfileConfig {
    fn implied_default() -> ProfileConfig {
        ProfileConfig {
            description: DEFAULT_PROFILE_DESCRIPTION.to_owned(),
            command: None,
            env_allow: Vec::new(),
            allow_dash_arguments: false,
        }
    }
}

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
        let path = Config::path(home);
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Config::parse("", env),
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        if meta.is_dir() {
            return Err(ConfigError::NotAFile {
                path,
                what: "a directory",
            });
        }
        // A FIFO would block the read forever.
        if !meta.is_file() {
            return Err(ConfigError::NotAFile {
                path,
                what: "not a regular file",
            });
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(ConfigError::TooBig { bytes: meta.len() });
        }
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            ConfigError::NotUtf8 {
                line: 1 + valid.iter().filter(|&&b| b == b'\n').count(),
            }
        })?;
        let (mut loaded, key_in_file) = Config::parse_text(&text, env)?;
        if key_in_file && readable_by_others(home, &meta) {
            loaded.warnings.push(Warning::KeyReadable(path));
        }
        Ok(loaded)
    }

    /// Parses the text of a config; empty text is every default.
    pub fn parse(text: &str, env: EnvLookup<'_>) -> Result<Loaded, ConfigError> {
        Config::parse_text(text, env).map(|(loaded, _)| loaded)
    }

    /// [`Config::parse`], and whether the text itself holds the API key.
    fn parse_text(text: &str, env: EnvLookup<'_>) -> Result<(Loaded, bool), ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        check_aliases(text)?;
        let docs = YamlLoader::load_from_str(text).map_err(|e| ConfigError::Syntax {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: syntax_message(e.info()),
        })?;
        if docs.len() > 1 {
            return Err(ConfigError::Shape(format!(
                "expected one YAML document, got {}",
                docs.len()
            )));
        }
        let root = docs.into_iter().next().unwrap_or(Yaml::Null);
        let mut walk = Walk::default();
        let mut config = Config::default();
        if !matches!(root, Yaml::Null | Yaml::BadValue | Yaml::Hash(_)) {
            return Err(ConfigError::Shape(format!(
                "expected a mapping of sections (model, auxiliary, kanban, profiles), got {}",
                describe(&root)
            )));
        }
        let root = if matches!(root, Yaml::BadValue) {
            Yaml::Null
        } else {
            root
        };
        let mut api_key = None;
        for (name, value) in walk.section(&root, "", SECTIONS)? {
            match name.as_ref() {
                "model" => api_key = walk.model(value, &mut config.model)?,
                "auxiliary" => walk.auxiliary(value, &mut config.auxiliary)?,
                "kanban" => walk.kanban(value, &mut config.kanban)?,
                "profiles" => walk.profiles(value, &mut config.profiles)?,
                other => walk.unknown(other),
            }
        }
        let key_in_file = api_key.is_some();
        check_endpoints(&config)?;
        config.model.api_key = api_key.or_else(|| {
            let var = config.model.api_key_env.as_str();
            (!var.is_empty())
                .then(|| env(var))
                .flatten()
                .filter(|v| !v.is_empty())
                .map(ApiKey::new)
        });
        let loaded = Loaded {
            config,
            warnings: walk.warnings,
        };
        Ok((loaded, key_in_file))
    }

    /// The decomposer's model: `auxiliary.kanban_decomposer.model`, else `model.default`.
    pub fn decomposer_model(&self) -> &str {
        or_fallback(&self.auxiliary.kanban_decomposer.model, &self.model.default)
    }

    /// The decomposer's endpoint: `auxiliary.kanban_decomposer.base_url`, else `model.base_url`.
    pub fn decomposer_base_url(&self) -> &str {
        or_fallback(&self.auxiliary.kanban_decomposer.base_url, &self.model.base_url)
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
        let profiles: Map<String, Value> = self
            .profiles
            .iter()
            .map(|(name, p)| {
                let mut profile = json!({ "description": p.description, "command": p.command });
                // Shown only when set, like the file a user writes.
                if !p.env_allow.is_empty() {
                    profile["env_allow"] = json!(p.env_allow);
                }
                if p.allow_dash_arguments {
                    profile["allow_dash_arguments"] = json!(true);
                }
                (name.clone(), profile)
            })
            .collect();
        let k = &self.kanban;
        let d = &self.auxiliary.kanban_decomposer;
        json!({
            "model": {
                "provider": self.model.provider,
                "base_url": redact_url(&self.model.base_url),
                "default": self.model.default,
                "api_key_env": self.model.api_key_env,
                "api_key": self.model.api_key.as_ref().map(ApiKey::to_string),
                "allow_insecure_http": self.model.allow_insecure_http,
            },
            "auxiliary": {
                "transient_retries": self.auxiliary.transient_retries,
                "kanban_decomposer": {
                    "model": d.model,
                    "base_url": redact_url(&d.base_url),
                    "timeout": d.timeout,
                    "max_tokens": d.max_tokens,
                },
            },
            "kanban": {
                "dispatch_interval_seconds": seconds_json(k.dispatch_interval_seconds),
                "max_spawn": k.max_spawn,
                "auto_decompose": k.auto_decompose,
                "auto_decompose_per_tick": k.auto_decompose_per_tick,
                "auto_decompose_concurrency": k.auto_decompose_concurrency,
                "auto_promote_children": k.auto_promote_children,
                "decompose_max_children": k.decompose_max_children,
                "decompose_failure_limit": k.decompose_failure_limit,
                "decompose_retry_base_seconds": k.decompose_retry_base_seconds,
                "default_assignee": k.default_assignee,
                "orchestrator_profile": k.orchestrator_profile,
                "failure_limit": k.failure_limit,
                "claim_ttl_seconds": k.claim_ttl_seconds,
                "sqlite_synchronous": match k.sqlite_synchronous {
                    Synchronous::Full => "full",
                    Synchronous::Normal => "normal",
                },
                "max_text_bytes": k.max_text_bytes,
            },
            "profiles": profiles,
        })
    }

    /// The effective values as YAML (the same tree as [`Config::effective_json`]), which
    /// parses back to this config (the key and the URLs' credentials aside).
    pub fn effective_yaml(&self) -> String {
        let doc = json_to_yaml(&self.effective_json());
        let mut out = String::new();
        // Writing to a String cannot fail, and the tree holds no unrepresentable value.
        let _ = YamlEmitter::new(&mut out).dump(&doc);
        let body = out.strip_prefix("---\n").unwrap_or(&out);
        format!("{body}\n")
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

/// A whole number of seconds prints as an integer (`60`, not `60.0`).
fn seconds_json(seconds: f64) -> Value {
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        json!(seconds as i64)
    } else {
        json!(seconds)
    }
}

fn json_to_yaml(value: &Value) -> Yaml {
    match value {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(items) => Yaml::Array(items.iter().map(json_to_yaml).collect()),
        Value::Object(map) => Yaml::Hash(
            map.iter()
                .map(|(k, v)| (Yaml::String(k.clone()), json_to_yaml(v)))
                .collect(),
        ),
    }
}

/// Refuses a file with more aliases than a config could need, before the loader copies them.
fn check_aliases(text: &str) -> Result<(), ConfigError> {
    let mut parser = Parser::new_from_str(text);
    let mut aliases = 0;
    // A syntax error stops the count; the loader reports it with its position.
    while let Ok((event, _)) = parser.next_token() {
        match event {
            Event::StreamEnd => break,
            Event::Alias(_) => aliases += 1,
            _ => {}
        }
        if aliases > MAX_ALIASES {
            return Err(ConfigError::Shape(format!(
                "more than {MAX_ALIASES} YAML aliases; a config needs few"
            )));
        }
    }
    Ok(())
}

/// The parser's words, with its duplicate-key message (which quotes the key as Rust
/// debug output, `String("max_spawn")`) made readable.
fn syntax_message(info: &str) -> String {
    let duplicate = info.strip_suffix(": duplicated key in mapping").map(|key| {
        key.strip_prefix("String(")
            .and_then(|k| k.strip_suffix(')'))
            .unwrap_or(key)
    });
    match duplicate {
        Some(key) => format!("duplicate key {key}"),
        None => info.to_owned(),
    }
}

/// A value as an error message quotes it.
fn describe(value: &Yaml) -> String {
    match value {
        Yaml::String(s) => format!("{s:?}"),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".to_owned(),
        Yaml::Array(_) => "a list".to_owned(),
        Yaml::Hash(_) => "a mapping".to_owned(),
        Yaml::Alias(_) | Yaml::BadValue => "an invalid value".to_owned(),
    }
}

/// The walk over the tree: it collects warnings as it goes.
#[derive(Default)]
struct Walk {
    warnings: Vec<Warning>,
}

impl Walk {
    fn unknown(&mut self, path: &str) {
        self.warnings.push(Warning::UnknownKey(path.to_owned()));
    }

    /// The entries of a section in file order (a null section is an empty one), a key
    /// that is not a string shown as its value. A known key whose value is null is left
    /// out, since null means "the default"; an unknown one stays, for its warning.
    fn section<'y>(
        &mut self,
        value: &'y Yaml,
        path: &str,
        known: &[&str],
    ) -> Result<Vec<(Cow<'y, str>, &'y Yaml)>, ConfigError> {
        let hash = match value {
            Yaml::Null => return Ok(Vec::new()),
            Yaml::Hash(hash) => hash,
            other => {
                return Err(ConfigError::invalid(
                    path,
                    format!("expected a mapping, got {}", describe(other)),
                ))
            }
        };
        let mut entries = Vec::new();
        for (key, value) in hash {
            let name = match key {
                Yaml::String(name) => Cow::Borrowed(name.as_str()),
                other => Cow::Owned(describe(other)),
            };
            if !(matches!(value, Yaml::Null) && known.contains(&name.as_ref())) {
                entries.push((name, value));
            }
        }
        Ok(entries)
    }

    fn model(&mut self, value: &Yaml, model: &mut ModelConfig) -> Result<Option<ApiKey>, ConfigError> {
        let mut api_key = None;
        for (name, value) in self.section(value, "model", MODEL_KEYS)? {
            let path = format!("model.{name}");
            match name.as_ref() {
                "provider" => model.provider = non_empty_string(value, &path)?,
                "base_url" => model.base_url = url(value, &path)?,
                "default" => model.default = non_empty_string(value, &path)?,
                "api_key_env" => model.api_key_env = string(value, &path)?,
                "allow_insecure_http" => model.allow_insecure_http = boolean(value, &path)?,
                "api_key" => {
                    // Never quote the value: a mistyped key is still a secret.
                    let Yaml::String(secret) = value else {
                        return Err(ConfigError::invalid(&path, "expected a string"));
                    };
                    api_key = (!secret.is_empty()).then(|| ApiKey::new(secret.clone()));
                }
                _ => self.unknown(&path),
            }
        }
        Ok(api_key)
    }

    fn auxiliary(&mut self, value: &Yaml, aux: &mut AuxiliaryConfig) -> Result<(), ConfigError> {
        for (name, value) in self.section(value, "auxiliary", AUXILIARY_KEYS)? {
            let path = format!("auxiliary.{name}");
            match name.as_ref() {
                "transient_retries" => aux.transient_retries = integer(value, &path, 0, MAX_RETRIES)?,
                "kanban_decomposer" => {
                    let d = &mut aux.kanban_decomposer;
                    for (name, value) in self.section(value, &path, DECOMPOSER_KEYS)? {
                        let path = format!("{path}.{name}");
                        match name.as_ref() {
                            "model" => d.model = string(value, &path)?,
                            "base_url" => {
                                d.base_url = match value {
                                    Yaml::String(s) if s.is_empty() => String::new(),
                                    _ => url(value, &path)?,
                                }
                            }
                            "timeout" => d.timeout = integer(value, &path, 1, MAX_TIMEOUT_SECONDS)?,
                            "max_tokens" => d.max_tokens = integer(value, &path, 1, MAX_TOKENS)?,
                            _ => self.unknown(&path),
                        }
                    }
                }
                _ => self.unknown(&path),
            }
        }
        Ok(())
    }

    fn kanban(&mut self, value: &Yaml, k: &mut KanbanConfig) -> Result<(), ConfigError> {
        let max_children = board_core::plan::MAX_CHILDREN_CEILING as i64;
        for (name, value) in self.section(value, "kanban", KANBAN_KEYS)? {
            let path = format!("kanban.{name}");
            let p = path.as_str();
            match name.as_ref() {
                "dispatch_interval_seconds" => k.dispatch_interval_seconds = interval(value, p)?,
                "max_spawn" => k.max_spawn = integer(value, p, 0, MAX_SPAWN)?,
                "auto_decompose" => k.auto_decompose = boolean(value, p)?,
                "auto_decompose_per_tick" => k.auto_decompose_per_tick = integer(value, p, 0, MAX_PER_TICK)?,
                "auto_decompose_concurrency" => {
                    k.auto_decompose_concurrency = integer(value, p, 1, MAX_PER_TICK)?
                }
                "auto_promote_children" => k.auto_promote_children = boolean(value, p)?,
                "decompose_max_children" => k.decompose_max_children = integer(value, p, 1, max_children)?,
                "decompose_failure_limit" => {
                    k.decompose_failure_limit = integer(value, p, 1, MAX_FAILURE_LIMIT)?
                }
                "decompose_retry_base_seconds" => {
                    k.decompose_retry_base_seconds = integer(value, p, 1, MAX_RETRY_BASE_SECONDS)?
                }
                "default_assignee" => k.default_assignee = non_empty_string(value, p)?,
                "orchestrator_profile" => k.orchestrator_profile = non_empty_string(value, p)?,
                "failure_limit" => k.failure_limit = integer(value, p, 1, MAX_FAILURE_LIMIT)?,
                "claim_ttl_seconds" => k.claim_ttl_seconds = integer(value, p, 1, MAX_CLAIM_TTL_SECONDS)?,
                "max_text_bytes" => k.max_text_bytes = integer(value, p, 1, MAX_TEXT_BYTES_CEILING)?,
                "sqlite_synchronous" => {
                    k.sqlite_synchronous = match value {
                        Yaml::String(s) => s.parse().ok(),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        ConfigError::invalid(p, format!("expected full or normal, got {}", describe(value)))
                    })?
                }
                _ => self.unknown(&path),
            }
        }
        Ok(())
    }

    fn profiles(
        &mut self,
        value: &Yaml,
        profiles: &mut BTreeMap<String, ProfileConfig>,
    ) -> Result<(), ConfigError> {
        let hash = match value {
            Yaml::Null => return Ok(()),
            Yaml::Hash(hash) => hash,
            other => {
                return Err(ConfigError::invalid(
                    "profiles",
                    format!("expected a mapping of profile names, got {}", describe(other)),
                ))
            }
        };
        for (key, value) in hash {
            let name = match key {
                Yaml::String(s) if !s.trim().is_empty() => s.clone(),
                other => {
                    return Err(ConfigError::invalid(
                        "profiles",
                        format!(
                            "a profile name must be a non-empty string, got {}",
                            describe(other)
                        ),
                    ))
                }
            };
            let path = format!("profiles.{name}");
            let mut profile = ProfileConfig {
                description: if name == DEFAULT_PROFILE {
                    DEFAULT_PROFILE_DESCRIPTION.to_owned()
                } else {
                    String::new()
                },
                command: None,
                env_allow: Vec::new(),
                allow_dash_arguments: false,
            };
            for (field, value) in self.section(value, &path, PROFILE_KEYS)? {
                let path = format!("{path}.{field}");
                match field.as_ref() {
                    "description" => profile.description = string(value, &path)?,
                    "command" => profile.command = Some(command(value, &path)?),
                    "env_allow" => profile.env_allow = variable_names(value, &path)?,
                    "allow_dash_arguments" => profile.allow_dash_arguments = boolean(value, &path)?,
                    _ => self.unknown(&path),
                }
            }
            profiles.insert(name, profile);
        }
        Ok(())
    }
}

fn string(value: &Yaml, path: &str) -> Result<String, ConfigError> {
    match value {
        Yaml::String(s) => Ok(s.clone()),
        other => Err(ConfigError::invalid(
            path,
            format!("expected a string, got {}", describe(other)),
        )),
    }
}

fn non_empty_string(value: &Yaml, path: &str) -> Result<String, ConfigError> {
    let s = string(value, path)?;
    if s.trim().is_empty() {
        return Err(ConfigError::invalid(path, "must not be empty"));
    }
    Ok(s)
}

/// An http(s) URL; whether plain HTTP may go to it is [`check_endpoints`]'s, once
/// `model.allow_insecure_http` is known wherever it stands in the file.
fn url(value: &Yaml, path: &str) -> Result<String, ConfigError> {
    let s = string(value, path)?;
    check_base_url(&s, true).map_err(|e| ConfigError::invalid(path, e.to_string()))?;
    Ok(s)
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

fn boolean(value: &Yaml, path: &str) -> Result<bool, ConfigError> {
    match value {
        Yaml::Boolean(b) => Ok(*b),
        other => Err(ConfigError::invalid(
            path,
            format!("expected true or false, got {}", describe(other)),
        )),
    }
}

/// An integer in `min..=max` (`min` is 0 or 1), converted to the field's type.
fn integer<T: TryFrom<i64>>(value: &Yaml, path: &str, min: i64, max: i64) -> Result<T, ConfigError> {
    let kind = if min > 0 { "a positive" } else { "a non-negative" };
    let n = match value {
        Yaml::Integer(n) if *n >= min => *n,
        other => {
            return Err(ConfigError::invalid(
                path,
                format!("expected {kind} integer, got {}", describe(other)),
            ))
        }
    };
    if n > max {
        return Err(ConfigError::invalid(
            path,
            format!("{n} is above the ceiling {max}"),
        ));
    }
    T::try_from(n).map_err(|_| ConfigError::invalid(path, format!("{n} is out of range")))
}

/// A number of seconds, fractional allowed, greater than 0.
fn interval(value: &Yaml, path: &str) -> Result<f64, ConfigError> {
    let seconds = match value {
        Yaml::Integer(n) => *n as f64,
        Yaml::Real(text) => value.as_f64().unwrap_or_else(|| text.parse().unwrap_or(f64::NAN)),
        _ => f64::NAN,
    };
    if !seconds.is_finite() {
        return Err(ConfigError::invalid(
            path,
            format!("expected a number of seconds, got {}", describe(value)),
        ));
    }
    if seconds <= 0.0 {
        return Err(ConfigError::invalid(path, "must be greater than 0"));
    }
    if seconds > MAX_INTERVAL_SECONDS {
        return Err(ConfigError::invalid(
            path,
            format!("{} is above the ceiling {MAX_INTERVAL_SECONDS}", describe(value)),
        ));
    }
    Ok(seconds)
}

/// A worker's argv: a non-empty list of strings whose program is not empty.
fn command(value: &Yaml, path: &str) -> Result<Vec<String>, ConfigError> {
    let Yaml::Array(items) = value else {
        return Err(ConfigError::invalid(
            path,
            format!("expected a list of strings, got {}", describe(value)),
        ));
    };
    if items.is_empty() {
        return Err(ConfigError::invalid(path, "must not be empty"));
    }
    let mut argv = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Yaml::String(s) => argv.push(s.clone()),
            other => {
                return Err(ConfigError::invalid(
                    path,
                    format!(
                        "expected a list of strings, got {} at position {}",
                        describe(other),
                        i + 1
                    ),
                ))
            }
        }
    }
    if argv.first().is_some_and(|program| program.trim().is_empty()) {
        return Err(ConfigError::invalid(
            path,
            "the program (the first item) must not be empty",
        ));
    }
    check_card_text(&argv, path)?;
    Ok(argv)
}

/// Card text never becomes code: not the program, and no `{title}` (or `{body}`) inside
/// the string a shell runs with `-c`, where a title holding `$(...)` would be executed.
/// `{body}` is not a placeholder at all: a body is long and a worker reads it with
/// `kanban context`.
fn check_card_text(argv: &[String], path: &str) -> Result<(), ConfigError> {
    if argv.iter().any(|arg| arg.contains("{body}")) {
        return Err(ConfigError::invalid(
            path,
            "{body} is not a placeholder; a worker reads the body with `kanban context`",
        ));
    }
    if argv.first().is_some_and(|program| program.contains("{title}")) {
        return Err(ConfigError::invalid(
            path,
            "the program (the first item) cannot come from the card's {title}",
        ));
    }
    let basename = |arg: &str| arg.rsplit('/').next().unwrap_or(arg).to_owned();
    let Some(shell) = argv
        .iter()
        .position(|arg| SHELLS.contains(&basename(arg).as_str()))
    else {
        return Ok(());
    };
    let runs_code = |flag: &str| {
        flag.strip_prefix('-')
            .is_some_and(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic()) && f.contains('c'))
    };
    for pair in argv[shell..].windows(2) {
        if runs_code(&pair[0]) && pair[1].contains("{title}") {
            return Err(ConfigError::invalid(
                path,
                format!(
                    "{{title}} inside the code of `{} {}` would run card text as shell code; \
                     read it from \"$KANBAN_TITLE\" instead",
                    argv[shell], pair[0]
                ),
            ));
        }
    }
    Ok(())
}

/// A list of environment variable names.
fn variable_names(value: &Yaml, path: &str) -> Result<Vec<String>, ConfigError> {
    let Yaml::Array(items) = value else {
        return Err(ConfigError::invalid(
            path,
            format!("expected a list of variable names, got {}", describe(value)),
        ));
    };
    items
        .iter()
        .map(|item| match item {
            Yaml::String(name) if !name.is_empty() && !name.contains(['=', '\0']) => Ok(name.clone()),
            other => Err(ConfigError::invalid(
                path,
                format!("expected a variable name, got {}", describe(other)),
            )),
        })
        .collect()
}
