//! `LaneDesk` for `SqliteStore`: the `lanes` table, a lane's counts as aggregates over
//! its runs, and a lane's claim in one `BEGIN IMMEDIATE` transaction.

use board_core::lanes::{self, Lane, LaneClaim, LaneStats, FAILED_OUTCOMES_SQL};
use board_core::store::{Claim, StoreResult};
use board_core::{Checks, LaneDesk, Refusal, StoreError, Task, Timestamp};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::tasks::query_tasks;
use super::{backend, transition_in};
use crate::rows::TASK_COLUMNS;
use crate::SqliteStore;

const LANE_COLUMNS: &str = "name, profiles, token_hash, created_at, revoked_at, last_seen_at, waiting_until";

fn lane_from_row(r: &Row<'_>) -> rusqlite::Result<Lane> {
    let profiles: String = r.get(1)?;
    let profiles = serde_json::from_str(&profiles).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(Lane {
        name: r.get(0)?,
        profiles,
        token_hash: r.get(2)?,
        created_at: r.get(3)?,
        revoked_at: r.get(4)?,
        last_seen_at: r.get(5)?,
        waiting_until: r.get(6)?,
    })
}

fn lane_where(conn: &Connection, column: &str, value: &str) -> StoreResult<Option<Lane>> {
    let sql = format!("SELECT {LANE_COLUMNS} FROM lanes WHERE {column} = ?1");
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([value], lane_from_row).optional())
        .map_err(backend)
}

fn no_lane(name: &str) -> StoreError {
    Refusal::NoSuchLane(name.to_owned()).into()
}

fn held(conn: &Connection, name: &str) -> StoreResult<u64> {
    conn.prepare_cached("SELECT count(*) FROM tasks WHERE lane = ?1")
        .and_then(|mut s| s.query_row([name], |r| r.get::<_, i64>(0)))
        .map(|n| n as u64)
        .map_err(backend)
}

fn any_ready(conn: &Connection, profiles: &str) -> StoreResult<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'ready'
         AND assignee IN (SELECT value FROM json_each(?1)))",
    )
    .and_then(|mut s| s.query_row([profiles], |r| r.get(0)))
    .map_err(backend)
}

fn json(profiles: &[String]) -> StoreResult<String> {
    serde_json::to_string(profiles).map_err(|e| StoreError::Backend(e.to_string()))
}

impl LaneDesk for SqliteStore {
    fn create_lane(&self, lane: &Lane) -> StoreResult<()> {
        let profiles = json(&lane.profiles)?;
        self.write(|tx| {
            if lane_where(tx, "name", &lane.name)?.is_some() {
                return Err(Refusal::LaneExists(lane.name.clone()).into());
            }
            tx.prepare_cached(&format!(
                "INSERT INTO lanes ({LANE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, NULL, NULL, NULL)"
            ))
            .and_then(|mut s| s.execute(params![lane.name, profiles, lane.token_hash, lane.created_at]))
            .map_err(backend)?;
            Ok(())
        })
    }

    fn lane(&self, name: &str) -> StoreResult<Option<Lane>> {
        lane_where(&self.conn(), "name", name)
    }

    fn lane_by_token(&self, token_hash: &str) -> StoreResult<Option<Lane>> {
        lane_where(&self.conn(), "token_hash", token_hash)
    }

    fn revoke_lane(&self, name: &str, now: Timestamp) -> StoreResult<Lane> {
        self.write(|tx| {
            tx.prepare_cached(
                "UPDATE lanes SET revoked_at = coalesce(revoked_at, ?2), waiting_until = NULL WHERE name = ?1",
            )
            .and_then(|mut s| s.execute(params![name, now]))
            .map_err(backend)?;
            lane_where(tx, "name", name)?.ok_or_else(|| no_lane(name))
        })
    }

    fn lane_stats(&self) -> StoreResult<Vec<LaneStats>> {
        let sql = format!(
            "SELECT {LANE_COLUMNS},
                (SELECT count(*) FROM tasks t WHERE t.lane = l.name),
                (SELECT count(*) FROM task_runs r WHERE r.lane = l.name AND r.outcome = 'completed'),
                (SELECT count(*) FROM task_runs r WHERE r.lane = l.name AND r.outcome IN {FAILED_OUTCOMES_SQL}),
                (SELECT max(last_heartbeat_at) FROM task_runs r WHERE r.lane = l.name)
             FROM lanes l ORDER BY name"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(LaneStats {
                    lane: lane_from_row(r)?,
                    held: r.get::<_, i64>(7)? as u64,
                    done: r.get::<_, i64>(8)? as u64,
                    failed: r.get::<_, i64>(9)? as u64,
                    last_heartbeat_at: r.get(10)?,
                })
            })
            .map_err(backend)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(backend)
    }

    fn see_lane(&self, name: &str, waiting_until: Option<Timestamp>, now: Timestamp) -> StoreResult<()> {
        self.write(|tx| {
            let changed = tx
                .prepare_cached("UPDATE lanes SET last_seen_at = ?2, waiting_until = ?3 WHERE name = ?1")
                .and_then(|mut s| s.execute(params![name, now, waiting_until]))
                .map_err(backend)?;
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
        let profiles = json(&lane.profiles)?;
        let first = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE status = 'ready'
             AND assignee IN (SELECT value FROM json_each(?1))
             ORDER BY priority DESC, created_at, rowid LIMIT 1"
        );
        // Nothing ready: answered by a read, without taking the write lock.
        if !any_ready(&self.conn(), &profiles)? {
            lanes::usable(&lane)?;
            return Ok(LaneClaim::Nothing);
        }
        self.write(|tx| {
            let lane = lane_where(tx, "name", name)?.ok_or_else(|| no_lane(name))?;
            lanes::admit(&lane, held(tx, name)?, max_held)?;
            tx.prepare_cached("UPDATE lanes SET last_seen_at = ?2 WHERE name = ?1")
                .and_then(|mut s| s.execute(params![name, now]))
                .map_err(backend)?;
            let Some(task) = query_tasks(tx, &first, [&profiles])?.pop() else {
                return Ok(LaneClaim::Nothing);
            };
            let claimed = transition_in(
                tx,
                &task.id,
                &lanes::claim_request(&lane, ttl, checks(&task)),
                now,
            )?;
            Ok(LaneClaim::Claimed(Box::new(Claim::of(claimed)?)))
        })
    }
}
