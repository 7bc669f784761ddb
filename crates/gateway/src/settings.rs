//! The tick's settings built from the configuration: the one place a `DispatchSettings`
//! is made, so its defaults are the config's.

use board_home::Config;

use crate::planner::{Boundary, DispatchSettings};

impl DispatchSettings {
    /// The tick's settings from the configuration.
    pub fn from_config(config: &Config) -> DispatchSettings {
        let k = &config.kanban;
        DispatchSettings {
            max_spawn: k.max_spawn,
            auto_decompose: k.auto_decompose,
            auto_decompose_per_tick: k.auto_decompose_per_tick,
            auto_decompose_concurrency: k.auto_decompose_concurrency,
            failure_limit: k.failure_limit,
            claim_ttl_seconds: k.claim_ttl_seconds,
            max_text_bytes: k.max_text_bytes,
            default_assignee: k.default_assignee.clone(),
            commands: config
                .profiles
                .iter()
                .map(|(name, p)| (name.clone(), p.command.clone()))
                .collect(),
            secret_vars: vec![
                config.model.api_key_env.clone(),
                config.decomposer_api_key_env().to_owned(),
            ],
            boundaries: config
                .profiles
                .iter()
                .map(|(name, p)| {
                    let boundary = Boundary {
                        env_allow: p.env_allow.clone(),
                        dash_arguments: p.allow_dash_arguments,
                        user: p.user.clone(),
                    };
                    (name.clone(), boundary)
                })
                .collect(),
            decompose_retry: config.decompose_retry(),
            decomposition_lease_seconds: decompose::lease_seconds(
                config.decomposer_timeout(),
                config.auxiliary.transient_retries,
            ),
            home_board: config.database_url.is_none(),
            ceilings: config.spend_ceilings(),
            config_stamp: Some(config.stamp()),
        }
    }
}

/// The settings of a config with every default.
impl Default for DispatchSettings {
    fn default() -> DispatchSettings {
        DispatchSettings::from_config(&Config::default())
    }
}
