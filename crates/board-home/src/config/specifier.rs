//! `auxiliary.triage_specifier.*`: Hermes' side call of `specify`. `kanban specify`
//! calls the model these keys name; each key left at its default is the decomposer's
//! (`auxiliary.kanban_decomposer.*`, itself falling back to `model.*`). The spend
//! ceilings, prices and ledger are the decomposer's: one bill for both calls.

use std::collections::BTreeMap;
use std::time::Duration;

use decompose::DecomposerSettings;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

use super::{decomposer, fields, providers, ApiKey, Config, MAX_TIMEOUT_SECONDS};

/// Hermes' default timeout of the specifier's call, in seconds.
const SPECIFIER_TIMEOUT_SECONDS: u64 = 120;

/// `auxiliary.triage_specifier.*`, Hermes' keys.
#[derive(Clone, Debug, PartialEq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct SpecifierConfig {
    /// `auto`: the decomposer's endpoint and key; a named provider: its own.
    #[default = "auto"]
    pub provider: String,
    /// Empty: the decomposer's model.
    pub model: String,
    /// Empty: the provider's endpoint, else the decomposer's.
    #[serde(
        deserialize_with = "fields::url_or_empty",
        serialize_with = "fields::redacted_url"
    )]
    pub base_url: String,
    /// Unset: the provider's variable, else the decomposer's key.
    #[serde(deserialize_with = "fields::api_key", serialize_with = "fields::redacted_key")]
    pub api_key: Option<ApiKey>,
    /// Seconds one call may take.
    #[default(SPECIFIER_TIMEOUT_SECONDS)]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_TIMEOUT_SECONDS>")]
    pub timeout: u64,
    /// Empty: the decomposer's.
    #[serde(deserialize_with = "decomposer::extra_body")]
    pub extra_body: BTreeMap<String, serde_json::Value>,
    /// Empty: the decomposer's.
    #[serde(deserialize_with = "decomposer::reasoning_effort")]
    pub reasoning_effort: String,
}

impl Config {
    /// The settings `kanban specify` calls the model with: the decomposer's, with each
    /// `auxiliary.triage_specifier` key that is set in their place.
    pub fn specifier_settings(&self) -> DecomposerSettings {
        let s = &self.auxiliary.triage_specifier;
        let mut settings = self.decomposer_settings();
        let provider = providers::provider(&s.provider);
        if let Some(url) = Some(s.base_url.as_str())
            .filter(|u| !u.is_empty())
            .or(provider.and_then(|p| p.base_url))
        {
            url.clone_into(&mut settings.base_url);
        }
        if let Some(var) = provider.and_then(|p| p.api_key_env) {
            settings.api_key_env = Some(var.to_owned());
            settings.api_key = None;
        }
        if let Some(key) = &s.api_key {
            settings.api_key = Some(key.clone());
        }
        if !s.model.is_empty() {
            s.model.clone_into(&mut settings.model);
        }
        settings.timeout = Duration::from_secs(s.timeout);
        if !s.extra_body.is_empty() {
            settings.extra_body = s.extra_body.clone().into_iter().collect();
        }
        if !s.reasoning_effort.is_empty() {
            settings.reasoning_effort = Some(s.reasoning_effort.clone());
        }
        settings
    }
}
