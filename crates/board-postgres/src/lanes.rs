//! `LaneDesk` for `PgStore`: the `lanes` table, a lane's counts as aggregates over its
//! runs, and a lane's claim in one transaction: the lane's row locked `FOR UPDATE` (so
//! its cap holds against its own concurrent claims), then the first ready task of its
//! profiles taken `FOR NO KEY UPDATE SKIP LOCKED`, as a gateway's claim takes it.

use std::sync::LazyLock;

use board_core::lanes::{self, Lane, LaneClaim, LaneStats, FAILED_OUTCOMES_SQL};
use board_core::store::{Claim, StoreResult};
use board_core::transition::decide;
use board_core::{Checks, LaneDesk, Refusal, StoreError, Task, Timestamp};
use postgres::Row;

use crate::apply::{apply, facts_and_fresh};
use crate::rows::{self, task_columns};
use crate::tx::Tx;
use crate::PgStore;

macro_rules! lane_columns {
    () => {
        "name, profiles, token_hash, created_at, revoked_at, last_seen_at, waiting_until"
    };
}

fn lane_from_row(r: &Row) -> StoreResult<Lane> {
    let get = |e: postgres::Error| crate::backend(e);
    let profiles: String = r.try_get(1).map_err(get)?;
    Ok(Lane {
        name: r.try_get(0).map_err(get)?,
        profiles: serde_json::from_str(&profiles)
            .map_err(|e| StoreError::Backend(format!("lanes.profiles: {e}")))?,
        token_hash: r.try_get(2).map_err(get)?,
        created_at: r.try_get(3).map_err(get)?,
        revoked_at: r.try_get(4).map_err(get)?,
        last_seen_at: r.try_get(5).map_err(get)?,
        waiting_until: r.try_get(6).map_err(get)?,
    })
}

fn no_lane(name: &str) -> StoreError {
    Refusal::NoSuchLane(name.to_owned()).into()
}

fn lane_named(tx: &mut Tx<'_>, sql: &'static str, value: &str) -> StoreResult<Option<Lane>> {
    tx.query_opt(sql, &[&value])?
        .as_ref()
        .map(lane_from_row)
        .transpose()
}

const BY_NAME: &str = concat!("SELECT ", lane_columns!(), " FROM lanes WHERE name = $1");
const BY_TOKEN: &str = concat!("SELECT ", lane_columns!(), " FROM lanes WHERE token_hash = $1");
const LOCK_LANE: &str = concat!(
    "SELECT ",
    lane_columns!(),
    " FROM lanes WHERE name = $1 FOR UPDATE"
);
const HELD: &str = "SELECT count(*) FROM tasks WHERE lane = $1";
const ANY_READY: &str = "SELECT 1 FROM tasks WHERE status = 'ready' AND assignee = ANY($1) LIMIT 1";
const FIRST_READY: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE status = 'ready' AND assignee = ANY($1)
     ORDER BY priority DESC, created_at, seq LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED"
);
/// Every lane with its counts; the failed outcomes are the core's list.
static STATS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {},
            (SELECT count(*) FROM tasks t WHERE t.lane = l.name),
            (SELECT count(*) FROM task_runs r WHERE r.lane = l.name AND r.outcome = 'completed'),
            (SELECT count(*) FROM task_runs r WHERE r.lane = l.name AND r.outcome IN {FAILED_OUTCOMES_SQL}),
            (SELECT max(last_heartbeat_at) FROM task_runs r WHERE r.lane = l.name)
         FROM lanes l ORDER BY name",
        lane_columns!()
    )
});

fn held(tx: &mut Tx<'_>, name: &str) -> StoreResult<u64> {
    let n: i64 = tx.query_one(HELD, &[&name])?.try_get(0).map_err(crate::backend)?;
    Ok(n as u64)
}

fn stats_from_row(r: &Row) -> StoreResult<LaneStats> {
    let count = |i: usize| r.try_get::<_, i64>(i).map(|n| n as u64).map_err(crate::backend);
    Ok(LaneStats {
        lane: lane_from_row(r)?,
        held: count(7)?,
        done: count(8)?,
        failed: count(9)?,
        last_heartbeat_at: r.try_get(10).map_err(crate::backend)?,
    })
}

impl LaneDesk for PgStore {
    fn create_lane(&self, lane: &Lane) -> StoreResult<()> {
        let profiles =
            serde_json::to_string(&lane.profiles).map_err(|e| StoreError::Backend(e.to_string()))?;
        self.write(|tx| {
            let inserted = tx.execute(
                concat!(
                    "INSERT INTO lanes (",
                    lane_columns!(),
                    ") VALUES ($1, $2, $3, $4, NULL, NULL, NULL) ON CONFLICT (name) DO NOTHING"
                ),
                &[&lane.name, &profiles, &lane.token_hash, &lane.created_at],
            )?;
            match inserted {
                0 => Err(Refusal::LaneExists(lane.name.clone()).into()),
                _ => Ok(()),
            }
        })
    }

    fn lane(&self, name: &str) -> StoreResult<Option<Lane>> {
        self.read_one(|tx| lane_named(tx, BY_NAME, name))
    }

    fn lane_by_token(&self, token_hash: &str) -> StoreResult<Option<Lane>> {
        self.read_one(|tx| lane_named(tx, BY_TOKEN, token_hash))
    }

    fn revoke_lane(&self, name: &str, now: Timestamp) -> StoreResult<Lane> {
        self.write(|tx| {
            tx.execute(
                "UPDATE lanes SET revoked_at = coalesce(revoked_at, $2), waiting_until = NULL WHERE name = $1",
                &[&name, &now],
            )?;
            lane_named(tx, BY_NAME, name)?.ok_or_else(|| no_lane(name))
        })
    }

    fn lane_stats(&self) -> StoreResult<Vec<LaneStats>> {
        self.read_one(|tx| tx.query(&STATS, &[])?.iter().map(stats_from_row).collect())
    }

    fn see_lane(&self, name: &str, waiting_until: Option<Timestamp>, now: Timestamp) -> StoreResult<()> {
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE lanes SET last_seen_at = $2, waiting_until = $3 WHERE name = $1",
                &[&name, &now, &waiting_until],
            )?;
            match changed {
                0 => Err(no_lane(name)),
                _ => Ok(()),
            }
        })
    }

    fn claim_for_lane(
        &self,
        name: &str,
        ttl: i64,
        max_held: u64,
        checks: &dyn Fn(&Task) -> Checks,
        now: Timestamp,
    ) -> StoreResult<LaneClaim> {
        let lane = self.lane(name)?.ok_or_else(|| no_lane(name))?;
        // Nothing ready: answered by a read, without locking the lane.
        if self.read_one(|tx| Ok(tx.query_opt(ANY_READY, &[&lane.profiles])?.is_none()))? {
            lanes::usable(&lane)?;
            return Ok(LaneClaim::Nothing);
        }
        self.write(|tx| {
            let lane = lane_named(tx, LOCK_LANE, name)?.ok_or_else(|| no_lane(name))?;
            lanes::admit(&lane, held(tx, name)?, max_held)?;
            tx.execute(
                "UPDATE lanes SET last_seen_at = $2 WHERE name = $1",
                &[&name, &now],
            )?;
            let Some(row) = tx.query(FIRST_READY, &[&lane.profiles])?.pop() else {
                return Ok(LaneClaim::Nothing);
            };
            let task = rows::task(&row)?;
            let request = lanes::claim_request(&lane, ttl, checks(&task));
            let (f, fresh) = facts_and_fresh(tx, task)?;
            let change = decide(&f, &request, &fresh, now)?;
            apply(tx, &f.task, &change, now)?;
            Ok(LaneClaim::Claimed(Box::new(Claim {
                task: change.task,
                run_id: fresh.run_id,
                claim_lock: fresh.claim_lock,
            })))
        })
    }
}
