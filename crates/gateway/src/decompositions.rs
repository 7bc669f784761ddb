//! Automatic decompositions in the background: each one a task on the gateway's runtime
//! that calls the model and commits on its own, so a slow model never stalls a tick.
//! Cancelling one drops its HTTP call; a commit already under way finishes whole or not
//! at all (it is one transaction).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use board_core::{Mode, PlanSettings, RetryPolicy, Store, TaskId};
use decompose::{DecomposerSettings, HttpModel, Profile, Roster};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::daemon::now;
use crate::dispatcher::Decompositions;

/// The decomposer's settings from the configuration (SPEC 8).
pub fn decomposer_settings(config: &Config) -> DecomposerSettings {
    let k = &config.kanban;
    let profiles = config
        .profiles
        .iter()
        .map(|(name, p)| Profile::new(name.clone(), p.description.clone()))
        .collect();
    DecomposerSettings {
        base_url: config.decomposer_base_url().to_owned(),
        model: config.decomposer_model().to_owned(),
        allow_insecure_http: config.model.allow_insecure_http,
        api_key: config.model.api_key.clone(),
        api_key_env: Some(config.model.api_key_env.clone()),
        timeout: config.decomposer_timeout(),
        max_tokens: config.decomposer_max_tokens(),
        transient_retries: config.auxiliary.transient_retries,
        roster: Roster::new(profiles)
            .with_default_assignee(Some(&k.default_assignee))
            .with_max_children(Some(k.decompose_max_children)),
        plan: PlanSettings {
            max_children: k.decompose_max_children,
            orchestrator: k.orchestrator_profile.clone(),
            auto_promote_children: k.auto_promote_children,
        },
        retry_policy: RetryPolicy {
            base_seconds: k.decompose_retry_base_seconds,
            failure_limit: k.decompose_failure_limit,
        },
        ..DecomposerSettings::default()
    }
}

/// Decompositions on a tokio runtime, at most one per card.
pub struct BackgroundDecompositions {
    runtime: Handle,
    store: Arc<dyn Store>,
    client: Arc<HttpModel>,
    settings: Arc<DecomposerSettings>,
    running: BTreeMap<TaskId, JoinHandle<()>>,
}

impl BackgroundDecompositions {
    pub fn new(
        runtime: Handle,
        store: Arc<dyn Store>,
        settings: DecomposerSettings,
    ) -> Result<BackgroundDecompositions, decompose::client::ClientError> {
        let client = HttpModel::new(&settings)?;
        Ok(BackgroundDecompositions {
            runtime,
            store,
            client: Arc::new(client),
            settings: Arc::new(settings),
            running: BTreeMap::new(),
        })
    }
}

impl Decompositions for BackgroundDecompositions {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        self.running.retain(|_, handle| !handle.is_finished());
        self.running.keys().cloned().collect()
    }

    fn start(&mut self, id: TaskId) {
        if self.running.get(&id).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let (store, client, settings) = (self.store.clone(), self.client.clone(), self.settings.clone());
        let card = id.clone();
        let handle = self.runtime.spawn(async move {
            let outcome = decompose::decompose(store, &*client, &card, Mode::Automatic, &settings, &now).await;
            if !outcome.ok {
                tracing::info!(task = %card, reason = outcome.reason.as_deref().unwrap_or(""), "automatic decomposition failed");
            }
        });
        self.running.insert(id, handle);
    }

    fn cancel_all(&mut self) {
        for handle in self.running.values() {
            handle.abort();
        }
        self.running.clear();
    }
}
