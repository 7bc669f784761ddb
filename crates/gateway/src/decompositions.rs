//! Automatic decompositions in the background: each one a task on the gateway's runtime
//! that calls the model and commits on its own, so a slow model never stalls a tick.
//! Cancelling one drops its HTTP call; a commit already under way finishes whole or not
//! at all (it is one transaction).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use board_core::{Mode, Store, TaskId};
use board_home::now;
use decompose::{Ask, DecomposerSettings, HttpModel};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::dispatcher::Decompositions;

/// Decompositions on a tokio runtime, at most one per card.
pub struct BackgroundDecompositions {
    runtime: Handle,
    store: Arc<dyn Store>,
    client: Arc<HttpModel>,
    settings: Arc<DecomposerSettings>,
    running: BTreeMap<TaskId, JoinHandle<()>>,
    /// Cards whose attempt ended with a charged failure the store could not record;
    /// written before the attempt's task finishes.
    unrecorded: Arc<Mutex<BTreeSet<TaskId>>>,
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
            unrecorded: Arc::default(),
        })
    }
}

impl Decompositions for BackgroundDecompositions {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        self.running.retain(|_, handle| !handle.is_finished());
        self.running.keys().cloned().collect()
    }

    fn start(&mut self, id: TaskId, probe: bool, lease: decompose::CardLease) {
        if self.running.get(&id).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let (store, client, settings) = (self.store.clone(), self.client.clone(), self.settings.clone());
        let (card, unrecorded) = (id.clone(), self.unrecorded.clone());
        let handle = self.runtime.spawn(async move {
            let ask = Ask {
                mode: Mode::Automatic,
                probe,
                over_budget: false,
                lease: Some(lease),
            };
            let outcome = decompose::decompose(store, &*client, &card, ask, &settings, &now).await;
            if outcome.unrecorded_failure {
                unrecorded.lock().unwrap_or_else(|e| e.into_inner()).insert(card.clone());
            }
            if !outcome.ok {
                tracing::info!(task = %card, reason = outcome.reason.as_deref().unwrap_or(""), "automatic decomposition failed");
            }
        });
        self.running.insert(id, handle);
    }

    fn unrecorded_failures(&mut self) -> BTreeSet<TaskId> {
        std::mem::take(&mut *self.unrecorded.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn reconfigure(&mut self, settings: DecomposerSettings) -> Result<(), decompose::ClientError> {
        let client = HttpModel::new(&settings)?;
        self.client = Arc::new(client);
        self.settings = Arc::new(settings);
        Ok(())
    }

    fn cancel_all(&mut self) {
        for handle in self.running.values() {
            handle.abort();
        }
        self.running.clear();
    }
}
