//! `MemStore`'s notification subscriptions, under the one lock.

use crate::notify::{attempted, resumed, Delivery, NewSubscription, NotifyDesk, Subscription};
use crate::refusal::Refusal;
use crate::store::StoreResult;
use crate::types::Timestamp;

use super::MemStore;

fn no_such(id: i64) -> crate::StoreError {
    Refusal::NoSuchSubscription(id).into()
}

impl NotifyDesk for MemStore {
    fn subscribe(&self, new: &NewSubscription, now: Timestamp) -> StoreResult<Subscription> {
        let new = new.clone().admit()?;
        let mut b = self.board();
        if let Some(task) = &new.task_id {
            b.task(task)?;
        }
        b.last_subscription_id += 1;
        let sub = Subscription {
            id: b.last_subscription_id,
            task_id: new.task_id,
            kinds: new.kinds,
            url: new.url,
            secret: new.secret,
            created_at: now,
            after_event: b.last_event_id,
            failures: 0,
            next_attempt_at: None,
            paused: false,
            last_status: None,
            last_attempt_at: None,
        };
        b.subscriptions.insert(sub.id, sub.clone());
        Ok(sub)
    }

    fn subscriptions(&self) -> StoreResult<Vec<Subscription>> {
        Ok(self.board().subscriptions.values().cloned().collect())
    }

    fn unsubscribe(&self, id: i64) -> StoreResult<Subscription> {
        self.board().subscriptions.remove(&id).ok_or_else(|| no_such(id))
    }

    fn record_delivery(&self, id: i64, from: i64, delivery: &Delivery, now: Timestamp) -> StoreResult<bool> {
        let mut b = self.board();
        let sub = b.subscriptions.get(&id).cloned().ok_or_else(|| no_such(id))?;
        let Some(next) = attempted(sub, from, delivery, now) else {
            return Ok(false);
        };
        b.subscriptions.insert(id, next);
        Ok(true)
    }

    fn resume_subscription(&self, id: i64) -> StoreResult<Subscription> {
        let mut b = self.board();
        let sub = b.subscriptions.get_mut(&id).ok_or_else(|| no_such(id))?;
        *sub = resumed(sub.clone());
        Ok(sub.clone())
    }
}
