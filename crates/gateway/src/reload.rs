//! Re-reading `config.yaml` in a running gateway (SIGHUP, `kanban gateway reload`): a
//! valid file takes effect at the next tick and one INFO line names the keys that
//! changed; an invalid one is refused with one ERROR line naming its key, and the running
//! config is kept. Workers and decompositions in flight are not touched.

use board_home::{Config, Home};
use serde_json::Value;

use crate::dispatcher::Dispatcher;

/// Keys read only when the gateway starts: a change is named, and waits for a restart.
const AT_START: &[&str] = &["gateway.metrics_bind", "kanban.sqlite_synchronous"];

/// The paths (`kanban.max_spawn`, `profiles.coder.command`) whose effective values differ.
pub fn changed_keys(old: &Config, new: &Config) -> Vec<String> {
    let mut changed = Vec::new();
    diff("", &old.effective_json(), &new.effective_json(), &mut changed);
    changed
}

fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                diff(&join(key), value, b.get(key).unwrap_or(&Value::Null), out);
            }
            for (key, value) in b.iter().filter(|(key, _)| !a.contains_key(*key)) {
                diff(&join(key), &Value::Null, value, out);
            }
        }
        (a, b) if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

/// Re-reads the home's config into `config` (and the decomposer's model settings), or
/// keeps it. Returns whether anything changed.
pub fn reload(home: &Home, config: &mut Config, dispatcher: &mut Dispatcher) -> bool {
    let fresh = match home.load_config() {
        Ok(fresh) => fresh,
        Err(e) => {
            tracing::error!(error = %e, "config reload refused; the running config is kept");
            return false;
        }
    };
    for warning in &fresh.warnings {
        tracing::warn!("{warning}");
    }
    let changed = changed_keys(config, &fresh.config);
    if changed.is_empty() {
        tracing::info!("config reloaded: nothing changed");
        return false;
    }
    let model_changed = changed
        .iter()
        .any(|key| key.starts_with("model.") || key.starts_with("auxiliary."));
    if model_changed {
        if let Err(e) = dispatcher.reconfigure_decompositions(fresh.config.decomposer_settings_in(home)) {
            tracing::error!(error = %e, "config reload refused: the model client cannot be built; the running config is kept");
            return false;
        }
    }
    let at_start: Vec<&str> = changed
        .iter()
        .map(String::as_str)
        .filter(|key| AT_START.contains(key))
        .collect();
    if at_start.is_empty() {
        tracing::info!(changed = %changed.join(", "), "config reloaded");
    } else {
        tracing::info!(changed = %changed.join(", "), after_restart = %at_start.join(", "), "config reloaded");
    }
    *config = fresh.config;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_names_each_leaf_that_differs() {
        let old = Config::default();
        let mut new = old.clone();
        assert!(changed_keys(&old, &new).is_empty());
        new.kanban.max_spawn = 9;
        new.auxiliary.kanban_decomposer.timeout = 7;
        new.profiles.insert("coder".into(), Default::default());
        assert_eq!(
            changed_keys(&old, &new),
            [
                "auxiliary.kanban_decomposer.timeout",
                "kanban.max_spawn",
                "profiles.coder"
            ]
        );
    }
}
