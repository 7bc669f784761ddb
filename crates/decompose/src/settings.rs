//! What a decomposition runs with (docs/config.md): the model endpoint, the HTTP limits, the
//! roster, the commit settings and the failure policy, with the defaults of docs/config.md, and the
//! [`ApiKey`] that never prints itself.

use std::fmt;
use std::time::Duration;

use board_core::plan::DEFAULT_MAX_CHILDREN;
use board_core::{Ceilings, PlanSettings, Prices, RetryPolicy};

use crate::roster::Roster;

/// The environment variable the API key is read from when no `api_key_env` is set.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The endpoint when none is configured: a local Ollama.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434/v1";
pub const DEFAULT_MODEL: &str = "llama3.1";
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 180;
pub const DEFAULT_MAX_TOKENS: u32 = 4000;
pub const DEFAULT_TRANSIENT_RETRIES: u32 = 2;

/// A model provider's API key. Its `Debug` and `Display` print `[redacted]`, so it can
/// sit in any struct that is logged; only [`ApiKey::expose`] gives the text, for the
/// `Authorization` header.
///
/// ```
/// use decompose::ApiKey;
///
/// let key = ApiKey::new("sk-secret");
/// assert_eq!(format!("{key} {key:?}"), "[redacted] [redacted]");
/// assert_eq!(key.expose(), "sk-secret");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself. Only the HTTP client's `Authorization` header should call this.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with the key, and any piece of it [`MIN_SECRET_FRAGMENT`] characters or
    /// longer (a provider quoting a truncated key), replaced by `[redacted]`: a last line
    /// of defence for text that came from elsewhere (a provider's error message).
    ///
    /// ```
    /// use decompose::ApiKey;
    ///
    /// let key = ApiKey::new("sk-0123456789abcdef");
    /// assert_eq!(key.scrub("bad key sk-01234567***"), "bad key [redacted]***");
    /// assert_eq!(key.scrub("ends in ...89abcdef"), "ends in ...[redacted]");
    /// ```
    pub fn scrub(&self, text: &str) -> String {
        mask_secret(text, &self.0)
    }
}

/// The shortest piece of a secret that is masked on its own; a shorter secret is
/// masked only whole.
pub const MIN_SECRET_FRAGMENT: usize = 8;

/// `text` with `secret` replaced by `[redacted]`, and so is every run of at least
/// [`MIN_SECRET_FRAGMENT`] characters that occurs inside `secret`.
pub fn mask_secret(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        return text.to_owned();
    }
    if secret.chars().count() < MIN_SECRET_FRAGMENT {
        return text.replace(secret, "[redacted]");
    }
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |(b, _)| *b);
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let mut end = i + MIN_SECRET_FRAGMENT;
        while end <= chars.len() && secret.contains(&text[byte_at(i)..byte_at(end)]) {
            end += 1;
        }
        if end > i + MIN_SECRET_FRAGMENT {
            out.push_str("[redacted]");
            i = end - 1;
        } else {
            out.push(chars[i].1);
            i += 1;
        }
    }
    out
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Everything a decomposition needs besides the store, the client and the clock.
///
/// `Default` is the defaults of docs/config.md: `http://127.0.0.1:11434/v1`, model `llama3.1`,
/// 180 s timeout, 4000 max tokens, 2 transient retries, 16 children, 3 failures before
/// parking, 30 s retry base, assignee and orchestrator `default`, children promoted, and
/// the key from `$OPENAI_API_KEY`.
///
/// Its `Debug` shows the base URL with its credentials redacted, and never the key.
#[derive(Clone)]
pub struct DecomposerSettings {
    /// The OpenAI-compatible base URL; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name sent in every request.
    pub model: String,
    /// `model.allow_insecure_http`: plain `http://` to a host other than this machine.
    pub allow_insecure_http: bool,
    /// `model.api_key`: wins over `api_key_env`.
    pub api_key: Option<ApiKey>,
    /// `model.api_key_env`: the variable the key is read from when `api_key` is unset.
    /// `None` means no key (a local server).
    pub api_key_env: Option<String>,
    /// The whole of one HTTP request, from connecting to the last byte of the body.
    pub timeout: Duration,
    /// `max_tokens` of every request.
    pub max_tokens: u32,
    /// How many times a transient failure (5xx, 408, 429, a connection error) is retried.
    pub transient_retries: u32,
    /// The first wait between transient retries; the n-th retry waits n times this,
    /// unless the server sent `Retry-After`. docs/decomposer.md says 1 s; tests set zero.
    pub retry_backoff: Duration,
    /// Who may be assigned work, the default assignee and the child cap.
    pub roster: Roster,
    /// The orchestrator, the child cap and auto-promotion, for the commit.
    pub plan: PlanSettings,
    /// The automatic failure policy: backoff base and the parking limit.
    pub retry_policy: RetryPolicy,
    /// `kanban.decompose_probe_max_seconds`: the longest wait between the provider
    /// breaker's probes (`None`: ten times the backoff base).
    pub probe_max_seconds: Option<i64>,
    /// The daily spend ceilings (none by default).
    pub ceilings: Ceilings,
    /// The model's prices, for each ledger row's cost (none by default).
    pub prices: Prices,
    /// A fingerprint of the config in force: an authentication fault holds the provider
    /// breaker open until it changes.
    pub config_stamp: Option<String>,
    /// Fields added to every request body (`auxiliary.kanban_decomposer.extra_body`);
    /// the config refuses the ones the decomposer owns (`model`, `messages`, ...).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// `reasoning_effort` of every request, when set.
    pub reasoning_effort: Option<String>,
    /// The home's team templates, by name: a decomposition may answer with one of them
    /// instead of a graph of its own (docs/decomposer.md#templates).
    pub templates: Vec<(String, board_core::Template)>,
}

impl DecomposerSettings {
    /// The key to send: `api_key`, else the value of the variable named by
    /// `api_key_env` when it is set and not blank, else none.
    pub fn resolved_api_key(&self) -> Option<ApiKey> {
        resolve_api_key(self.api_key.as_ref(), self.api_key_env.as_deref())
    }
}

/// The key a request is sent with: `key` if set, else the non-blank value of the
/// variable `env` names.
pub fn resolve_api_key(key: Option<&ApiKey>, env: Option<&str>) -> Option<ApiKey> {
    if let Some(key) = key {
        return Some(key.clone());
    }
    std::env::var(env?)
        .ok()
        .filter(|value| !value.trim().is_empty())
        .map(ApiKey::new)
}

impl fmt::Debug for DecomposerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecomposerSettings")
            .field("base_url", &crate::endpoint::redact_url(&self.base_url))
            .field("model", &self.model)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("api_key", &self.api_key)
            .field("api_key_env", &self.api_key_env)
            .field("timeout", &self.timeout)
            .field("max_tokens", &self.max_tokens)
            .field("transient_retries", &self.transient_retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("roster", &self.roster)
            .field("plan", &self.plan)
            .field("retry_policy", &self.retry_policy)
            .field("probe_max_seconds", &self.probe_max_seconds)
            .field("ceilings", &self.ceilings)
            .field("prices", &self.prices)
            .field("extra_body", &self.extra_body)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("templates", &self.templates.len())
            .finish_non_exhaustive()
    }
}

impl Default for DecomposerSettings {
    fn default() -> DecomposerSettings {
        DecomposerSettings {
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            allow_insecure_http: false,
            api_key: None,
            api_key_env: Some(DEFAULT_API_KEY_ENV.to_owned()),
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
            max_tokens: DEFAULT_MAX_TOKENS,
            transient_retries: DEFAULT_TRANSIENT_RETRIES,
            retry_backoff: Duration::from_secs(1),
            roster: Roster::default().with_max_children(Some(DEFAULT_MAX_CHILDREN)),
            plan: PlanSettings::default(),
            retry_policy: RetryPolicy::default(),
            probe_max_seconds: None,
            ceilings: Ceilings::default(),
            prices: Prices::default(),
            config_stamp: None,
            extra_body: serde_json::Map::new(),
            reasoning_effort: None,
            templates: Vec::new(),
        }
    }
}
