//! `NotifyDesk` for `PgStore`: the `notify_subscriptions` table; an attempt's record
//! locks the row and is a compare-and-set on the cursor it was made from.

use board_core::notify::{attempted, resumed, Delivery, NewSubscription, NotifyDesk, Subscription};
use board_core::store::StoreResult;
use board_core::{Refusal, StoreError, Timestamp};
use postgres::Row;

use crate::apply::require_task;
use crate::tx::Tx;
use crate::PgStore;

macro_rules! columns {
    () => {
        "id, task_id, kinds, url, secret, created_at, after_event, failures, next_attempt_at, paused, \
         last_status, last_attempt_at"
    };
}

const ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM notify_subscriptions WHERE id = $1 FOR UPDATE"
);
const ALL: &str = concat!("SELECT ", columns!(), " FROM notify_subscriptions ORDER BY id");
const INSERT: &str = concat!(
    "INSERT INTO notify_subscriptions (task_id, kinds, url, secret, created_at, after_event)
     VALUES ($1, $2, $3, $4, $5, (SELECT COALESCE(MAX(id), 0) FROM task_events)) RETURNING ",
    columns!()
);
const WRITE_BACK: &str =
    "UPDATE notify_subscriptions SET after_event = $2, failures = $3, next_attempt_at = $4,
     paused = $5, last_status = $6, last_attempt_at = $7 WHERE id = $1";

fn from_row(r: &Row) -> StoreResult<Subscription> {
    let get = |e: postgres::Error| crate::backend(e);
    let task: Option<String> = r.try_get(1).map_err(get)?;
    let kinds: String = r.try_get(2).map_err(get)?;
    Ok(Subscription {
        id: r.try_get(0).map_err(get)?,
        task_id: task
            .map(|t| t.parse())
            .transpose()
            .map_err(|e| StoreError::Backend(format!("notify_subscriptions.task_id: {e}")))?,
        kinds: serde_json::from_str(&kinds)
            .map_err(|e| StoreError::Backend(format!("notify_subscriptions.kinds: {e}")))?,
        url: r.try_get(3).map_err(get)?,
        secret: r.try_get(4).map_err(get)?,
        created_at: r.try_get(5).map_err(get)?,
        after_event: r.try_get(6).map_err(get)?,
        failures: r.try_get(7).map_err(get)?,
        next_attempt_at: r.try_get(8).map_err(get)?,
        paused: r.try_get(9).map_err(get)?,
        last_status: r.try_get(10).map_err(get)?,
        last_attempt_at: r.try_get(11).map_err(get)?,
    })
}

fn one(tx: &mut Tx<'_>, id: i64) -> StoreResult<Subscription> {
    match tx.query_opt(ONE, &[&id])? {
        Some(row) => from_row(&row),
        None => Err(Refusal::NoSuchSubscription(id).into()),
    }
}

fn write_back(tx: &mut Tx<'_>, s: &Subscription) -> StoreResult<()> {
    tx.execute(
        WRITE_BACK,
        &[
            &s.id,
            &s.after_event,
            &s.failures,
            &s.next_attempt_at,
            &s.paused,
            &s.last_status,
            &s.last_attempt_at,
        ],
    )?;
    Ok(())
}

impl NotifyDesk for PgStore {
    fn subscribe(&self, new: &NewSubscription, now: Timestamp) -> StoreResult<Subscription> {
        let new = new.clone().admit()?;
        let kinds = serde_json::to_string(&new.kinds).map_err(|e| StoreError::Backend(e.to_string()))?;
        self.write(|tx| {
            if let Some(task) = &new.task_id {
                require_task(tx, task)?;
            }
            let task = new.task_id.as_ref().map(|t| t.as_str());
            let row = tx.query_one(INSERT, &[&task, &kinds, &new.url, &new.secret, &now])?;
            from_row(&row)
        })
    }

    fn subscriptions(&self) -> StoreResult<Vec<Subscription>> {
        self.read(|tx| tx.query(ALL, &[])?.iter().map(from_row).collect())
    }

    fn unsubscribe(&self, id: i64) -> StoreResult<Subscription> {
        self.write(|tx| {
            let gone = one(tx, id)?;
            tx.execute("DELETE FROM notify_subscriptions WHERE id = $1", &[&id])?;
            Ok(gone)
        })
    }

    fn record_delivery(&self, id: i64, from: i64, delivery: &Delivery, now: Timestamp) -> StoreResult<bool> {
        self.write(|tx| match attempted(one(tx, id)?, from, delivery, now) {
            Some(next) => write_back(tx, &next).map(|()| true),
            None => Ok(false),
        })
    }

    fn resume_subscription(&self, id: i64) -> StoreResult<Subscription> {
        self.write(|tx| {
            let sub = resumed(one(tx, id)?);
            write_back(tx, &sub).map(|()| sub)
        })
    }
}
