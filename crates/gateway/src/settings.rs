//! The tick's settings built from the configuration: the one place a `DispatchSettings`
//! is made, so its defaults are the config's.

use board_home::config::{Contract, Review};
use board_home::Config;

use crate::planner::{Boundary, DispatchSettings, Gates, LogRotation};

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
            verify_failure_limit: k.verify_failure_limit,
            review_round_limit: k.review_round_limit,
            claim_ttl_seconds: k.claim_ttl_seconds,
            max_text_bytes: k.max_text_bytes,
            default_assignee: k.default_assignee.clone(),
            commands: config
                .profiles
                .iter()
                .map(|(name, p)| (name.clone(), p.command.clone()))
                .collect(),
            external: config
                .profiles
                .iter()
                .filter(|(_, p)| p.external)
                .map(|(name, _)| name.clone())
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
            gates: config
                .profiles
                .iter()
                .map(|(name, p)| {
                    let gates = Gates {
                        verify: p.verify.clone(),
                        review: p.review == Review::Required,
                        reviewer: p.reviewer.clone(),
                        evidence: p.contract == Some(Contract::Evidence),
                        auto: p.contract == Some(Contract::Auto),
                        max_concurrent: p.max_concurrent.or(k.max_in_progress_per_profile),
                    };
                    (name.clone(), gates)
                })
                .collect(),
            verifier: Some(verifier_argv()),
            verify_timeout_seconds: k.verify_timeout_seconds,
            decompose_retry: config.decompose_retry(),
            decomposition_lease_seconds: decompose::lease_seconds(
                config.decomposer_timeout(),
                config.auxiliary.transient_retries,
            ),
            home_board: config.database_url.is_none(),
            stale_timeout_seconds: k.dispatch_stale_timeout_seconds,
            worker_log: LogRotation {
                bytes: k.worker_log_rotate_bytes,
                backups: k.worker_log_backup_count,
            },
            ceilings: config.spend_ceilings(),
            config_stamp: Some(config.stamp()),
        }
    }
}

/// The argv of a verify run's worker: `kanban verify`, from the `kanban` this process is
/// (`kanban gateway run`) or sits beside (`kanban-gateway`), else the one on `PATH`.
pub fn verifier_argv() -> Vec<String> {
    let kanban = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let beside = exe.with_file_name("kanban");
            (exe.file_name()? == "kanban" || beside.is_file()).then_some(beside)
        })
        .map_or_else(|| "kanban".to_owned(), |path| path.display().to_string());
    vec![kanban, "verify".to_owned()]
}

/// The settings of a config with every default.
impl Default for DispatchSettings {
    fn default() -> DispatchSettings {
        DispatchSettings::from_config(&Config::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_without_its_own_cap_gets_kanban_max_in_progress_per_profile() {
        let text = "kanban:\n  max_in_progress_per_profile: 2\n  dispatch_stale_timeout_seconds: 600\n  worker_log_rotate_bytes: 4096\n  worker_log_backup_count: 0\n\
                    profiles:\n  coder: {command: [coder]}\n  solo: {command: [solo], max_concurrent: 1}\n";
        let config = Config::parse(text, &|_| None).unwrap().config;
        let settings = DispatchSettings::from_config(&config);
        let cap = |p: &str| settings.gates_for(p).and_then(|g| g.max_concurrent);
        assert_eq!((cap("coder"), cap("solo")), (Some(2), Some(1)));
        assert_eq!(
            settings.worker_log,
            LogRotation {
                bytes: 4096,
                backups: 0
            }
        );
        assert_eq!(settings.stale_timeout_seconds, 600);
        let unset = DispatchSettings::default();
        assert_eq!(unset.gates_for("default").and_then(|g| g.max_concurrent), None);
    }
}
