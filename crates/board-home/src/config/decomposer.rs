//! The decomposer's settings as the config gives them, for `kanban decompose` and the
//! gateway's automatic decompositions alike, and the reading of its request keys
//! (`extra_body`, `reasoning_effort`).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use board_core::{Ceilings, PlanSettings, Prices, RetryPolicy};
use decompose::{DecomposerSettings, Profile, Roster};
use serde::{de, Deserialize, Deserializer};

use super::Config;

impl Config {
    /// The decomposer's settings: its endpoint and model (falling back to `model.*`),
    /// the roster of profiles, the plan's limits and the automatic failure policy.
    /// [`Config::decomposer_settings`] with `home`'s team templates that pass their
    /// checks: a decomposition may answer with one of them.
    pub fn decomposer_settings_in(&self, home: &crate::Home) -> DecomposerSettings {
        let mut settings = self.decomposer_settings();
        settings.templates = super::templates(home)
            .into_iter()
            .filter_map(|(name, read)| Some((name, read.ok()?)))
            .collect();
        settings
    }

    pub fn decomposer_settings(&self) -> DecomposerSettings {
        let k = &self.kanban;
        let profiles = self
            .profiles
            .iter()
            .map(|(name, p)| Profile::new(name.clone(), p.description.clone()))
            .collect();
        DecomposerSettings {
            base_url: self.decomposer_base_url().to_owned(),
            model: self.decomposer_model().to_owned(),
            allow_insecure_http: self.model.allow_insecure_http,
            api_key: self.decomposer_api_key().cloned(),
            api_key_env: Some(self.decomposer_api_key_env().to_owned()),
            timeout: self.decomposer_timeout(),
            max_tokens: self.decomposer_max_tokens(),
            transient_retries: self.auxiliary.transient_retries,
            roster: Roster::new(profiles)
                .with_default_assignee(Some(&k.default_assignee))
                .with_max_children(Some(k.decompose_max_children)),
            plan: PlanSettings {
                max_children: k.decompose_max_children,
                orchestrator: k.orchestrator_profile.clone(),
                auto_promote_children: k.auto_promote_children,
            },
            retry_policy: self.decompose_retry(),
            probe_max_seconds: self.kanban.decompose_probe_max_seconds,
            ceilings: self.spend_ceilings(),
            prices: self.decomposer_prices(),
            config_stamp: Some(self.stamp()),
            extra_body: self
                .auxiliary
                .kanban_decomposer
                .extra_body
                .clone()
                .into_iter()
                .collect(),
            reasoning_effort: Some(self.auxiliary.kanban_decomposer.reasoning_effort.clone())
                .filter(|e| !e.is_empty()),
            ..DecomposerSettings::default()
        }
    }

    /// The daily ceilings on the decomposer's spend.
    pub fn spend_ceilings(&self) -> Ceilings {
        let d = &self.auxiliary.kanban_decomposer;
        Ceilings {
            max_requests_per_day: d.max_requests_per_day,
            max_tokens_per_day: d.max_tokens_per_day,
            max_cost_per_day: d.max_cost_per_day,
        }
    }

    /// The decomposer model's prices.
    pub fn decomposer_prices(&self) -> Prices {
        let d = &self.auxiliary.kanban_decomposer;
        Prices {
            per_million_input: d.price_per_million_input,
            per_million_output: d.price_per_million_output,
        }
    }

    /// A fingerprint of these values and of the key they resolve to (never the key
    /// itself): it changes when the file is edited in any way that matters, and an
    /// authentication fault holds the provider breaker open until it does.
    pub fn stamp(&self) -> String {
        let mut hasher = DefaultHasher::new();
        self.effective_yaml().hash(&mut hasher);
        let key = decompose::resolve_api_key(self.decomposer_api_key(), Some(self.decomposer_api_key_env()));
        if let Some(key) = key {
            key.expose().hash(&mut hasher);
        }
        format!("{:016x}", hasher.finish())
    }

    /// The variable the decomposer's key comes from (for messages): its provider's, else
    /// `model.api_key_env`.
    pub fn decomposer_api_key_env(&self) -> &str {
        super::providers::provider(&self.auxiliary.kanban_decomposer.provider)
            .and_then(|p| p.api_key_env)
            .unwrap_or(&self.model.api_key_env)
    }

    /// The backoff and parking of failed automatic decompositions.
    pub fn decompose_retry(&self) -> RetryPolicy {
        RetryPolicy {
            base_seconds: self.kanban.decompose_retry_base_seconds,
            failure_limit: self.kanban.decompose_failure_limit,
        }
    }
}

/// `extra_body`: a mapping of request fields, none of them one the decomposer owns.
pub fn extra_body<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, serde_json::Value>, D::Error> {
    let fields = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
    match fields
        .keys()
        .find(|k| decompose::prompt::OWN_FIELDS.contains(&k.as_str()))
    {
        Some(own) => Err(de::Error::custom(format!(
            "{own:?} is the decomposer's own request field and cannot be set here"
        ))),
        None => Ok(fields),
    }
}

/// The words of Hermes' `reasoning_effort`, and empty for the provider's default.
const REASONING_EFFORTS: &[&str] = &[
    "", "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra",
];

/// `reasoning_effort`: one of [`REASONING_EFFORTS`].
pub fn reasoning_effort<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let word = String::deserialize(d)?;
    match REASONING_EFFORTS.contains(&word.trim()) {
        true => Ok(word.trim().to_owned()),
        false => Err(de::Error::custom(format!(
            "expected one of none, minimal, low, medium, high, xhigh, max, ultra (or empty), got {:?}",
            word.chars().take(40).collect::<String>()
        ))),
    }
}
