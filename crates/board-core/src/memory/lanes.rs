//! `MemStore`'s lanes: the lane table beside the tasks, a claim under the one lock.

use crate::lanes::{self, Lane, LaneClaim, LaneStats};
use crate::refusal::Refusal;
use crate::store::{Claim, LaneDesk, StoreResult};
use crate::types::{Checks, RunStatus, Status, Task, Timestamp};

use super::{queue_order, MemStore};

impl LaneDesk for MemStore {
    fn create_lane(&self, lane: &Lane) -> StoreResult<()> {
        let mut b = self.board();
        if b.lanes.contains_key(&lane.name) {
            return Err(Refusal::LaneExists(lane.name.clone()).into());
        }
        b.lanes.insert(lane.name.clone(), lane.clone());
        Ok(())
    }

    fn lane(&self, name: &str) -> StoreResult<Option<Lane>> {
        Ok(self.board().lanes.get(name).cloned())
    }

    fn lane_by_token(&self, token_hash: &str) -> StoreResult<Option<Lane>> {
        Ok(self
            .board()
            .lanes
            .values()
            .find(|l| l.token_hash == token_hash)
            .cloned())
    }

    fn revoke_lane(&self, name: &str, now: Timestamp) -> StoreResult<Lane> {
        let mut b = self.board();
        let lane = b
            .lanes
            .get_mut(name)
            .ok_or_else(|| Refusal::NoSuchLane(name.to_owned()))?;
        lane.revoked_at.get_or_insert(now);
        lane.waiting_until = None;
        Ok(lane.clone())
    }

    fn lane_stats(&self) -> StoreResult<Vec<LaneStats>> {
        let b = self.board();
        let stats = b
            .lanes
            .values()
            .map(|lane| {
                let runs = || b.runs.values().filter(|r| r.lane.as_ref() == Some(&lane.name));
                LaneStats {
                    lane: lane.clone(),
                    held: b
                        .tasks
                        .values()
                        .filter(|t| t.lane() == Some(lane.name.as_str()))
                        .count() as u64,
                    done: runs()
                        .filter(|r| r.outcome == Some(crate::Outcome::Completed))
                        .count() as u64,
                    failed: runs()
                        .filter(|r| {
                            r.status == RunStatus::Ended
                                && r.outcome.is_some_and(crate::Outcome::counts_as_failure)
                        })
                        .count() as u64,
                    last_heartbeat_at: runs().filter_map(|r| r.last_heartbeat_at).max(),
                }
            })
            .collect();
        Ok(stats)
    }

    fn see_lane(&self, name: &str, waiting_until: Option<Timestamp>, now: Timestamp) -> StoreResult<()> {
        let mut b = self.board();
        let lane = b
            .lanes
            .get_mut(name)
            .ok_or_else(|| Refusal::NoSuchLane(name.to_owned()))?;
        lane.last_seen_at = Some(now);
        lane.waiting_until = waiting_until;
        Ok(())
    }

    fn claim_for_lane(
        &self,
        name: &str,
        ttl: i64,
        max_held: u64,
        checks: &dyn Fn(&Task) -> Checks,
        now: Timestamp,
    ) -> StoreResult<LaneClaim> {
        let mut b = self.board();
        let lane = b
            .lanes
            .get(name)
            .cloned()
            .ok_or_else(|| Refusal::NoSuchLane(name.to_owned()))?;
        let mut ready: Vec<&Task> = b
            .tasks
            .values()
            .filter(|t| t.status == Status::Ready && lane.serves(t))
            .collect();
        ready.sort_by(|x, y| queue_order(x, y));
        let Some(task) = ready.first().map(|t| (*t).clone()) else {
            lanes::usable(&lane)?;
            return Ok(LaneClaim::Nothing);
        };
        let held = b.tasks.values().filter(|t| t.lane() == Some(name)).count() as u64;
        lanes::admit(&lane, held, max_held)?;
        if let Some(seen) = b.lanes.get_mut(name) {
            seen.last_seen_at = Some(now);
        }
        let claimed = b.transition(&task.id, &lanes::claim_request(&lane, ttl, checks(&task)), now)?;
        Ok(LaneClaim::Claimed(Box::new(Claim::of(claimed)?)))
    }
}
