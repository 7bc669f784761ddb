//! Lanes (docs/lanes.md): agents outside the gateway that pull work. A lane is a named
//! credential scoped to one or more profiles; it claims the next ready task of those
//! profiles, holds the run under a lease it extends, and reports on the runs it holds
//! only. The board keeps a lane's token as its SHA-256 digest, never the token.
//!
//! What is decided here: a lane's name, whether a token is one a lane was given, which
//! claim a lane may make now (`admit`), and the request that claims a task for it.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::refusal::Refusal;
use crate::store::{BoardWrites, StoreResult};
use crate::transition::{Claiming, Request};
use crate::types::{Checks, RunKind, Task, Timestamp};

/// The prefix of every lane token, so a token pasted in the wrong place is recognisable.
pub const TOKEN_PREFIX: &str = "kl_";

/// The longest lane name, and the most profiles one lane may serve.
pub const NAME_MAX_CHARS: usize = 64;
pub const PROFILES_MAX: usize = 32;

/// A lane as the board stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lane {
    pub name: String,
    /// The profiles whose ready tasks it may claim.
    pub profiles: Vec<String>,
    /// The SHA-256 of its token, hex.
    #[serde(skip)]
    pub token_hash: String,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// When it last claimed, or started or ended a wait.
    pub last_seen_at: Option<Timestamp>,
    /// While a claim of it waits for work: when that wait ends.
    pub waiting_until: Option<Timestamp>,
}

impl Lane {
    /// A new lane of `profiles`, holding the digest of `token`.
    pub fn new(name: &str, profiles: &[String], token: &str, now: Timestamp) -> Result<Lane, Refusal> {
        check_name(name)?;
        if profiles.is_empty() || profiles.len() > PROFILES_MAX {
            return Err(Refusal::Invalid(format!(
                "a lane serves 1 to {PROFILES_MAX} profiles (--profile NAME)"
            )));
        }
        for profile in profiles {
            crate::limits::short("a profile", profile)?;
            if profile.trim().is_empty() {
                return Err(Refusal::Invalid("a lane's profile cannot be blank".to_owned()));
            }
        }
        let mut profiles = profiles.to_vec();
        profiles.sort();
        profiles.dedup();
        Ok(Lane {
            name: name.to_owned(),
            profiles,
            token_hash: token_hash(token),
            created_at: now,
            revoked_at: None,
            last_seen_at: None,
            waiting_until: None,
        })
    }

    /// Whether it may claim `task`'s work: the task's profile is one of its own.
    pub fn serves(&self, task: &Task) -> bool {
        task.assignee.as_ref().is_some_and(|a| self.profiles.contains(a))
    }
}

/// A lane's name: 1 to 64 of `a-z`, `0-9`, `-`, `_`, starting with a letter or digit.
pub fn check_name(name: &str) -> Result<(), Refusal> {
    let fine = !name.is_empty()
        && name.len() <= NAME_MAX_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    match fine {
        true => Ok(()),
        false => Err(Refusal::Invalid(format!(
            "a lane name is 1 to {NAME_MAX_CHARS} of a-z, 0-9, '-' and '_', starting with a letter or digit"
        ))),
    }
}

/// The digest the board keeps of a lane's token: SHA-256, hex. A token is 32 random
/// bytes, so a plain digest is as strong as a slow one and costs a microsecond per call.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A token from 32 random bytes: `kl_` and 64 hex digits.
pub fn token_from(random: [u8; 32]) -> String {
    format!("{TOKEN_PREFIX}{}", hex(&random))
}

/// Whether `lane` may claim one more task while it holds `held`, under the board's cap.
pub fn admit(lane: &Lane, held: u64, max_held: u64) -> Result<(), Refusal> {
    usable(lane)?;
    if held >= max_held {
        return Err(Refusal::LaneFull {
            lane: lane.name.clone(),
            held,
        });
    }
    Ok(())
}

/// Whether `lane` may claim at all: it is not revoked. (A claim that finds nothing
/// ready asks only this: its cap matters only when there is something to take.)
pub fn usable(lane: &Lane) -> Result<(), Refusal> {
    match lane.revoked_at {
        Some(_) => Err(Refusal::LaneRevoked(lane.name.clone())),
        None => Ok(()),
    }
}

/// The claim of a ready task's work for `lane`, with the checks its completion must pass.
pub fn claim_request(lane: &Lane, ttl: i64, checks: Checks) -> Request {
    Request::Claim(Claiming {
        ttl,
        host: None,
        kind: RunKind::Work,
        checks,
        lane: Some(lane.name.clone()),
        assign: None,
    })
}

/// The run of `task` that `lane` holds now, if it is `run_id` (or any, when `None`): the
/// run is current and the lane's.
pub fn holds(lane: &Lane, task: &Task, run_id: Option<i64>) -> Result<i64, Refusal> {
    match &task.lease {
        Some(l) if run_id.is_none_or(|r| r == l.run_id) && l.lane.as_deref() == Some(lane.name.as_str()) => {
            Ok(l.run_id)
        }
        _ => Err(Refusal::NotLanesRun {
            lane: lane.name.clone(),
            id: task.id.clone(),
            run_id,
        }),
    }
}

/// What a lane's claim found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaneClaim {
    /// The task it claimed, under a fresh run.
    Claimed(Box<crate::store::Claim>),
    /// No ready task of its profiles.
    Nothing,
}

/// A lane with what it did, for `lane list`, `stats`, `gateway status` and the web board.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LaneStats {
    #[serde(flatten)]
    pub lane: Lane,
    /// Tasks whose runs it holds now.
    pub held: u64,
    /// Its runs that completed, and those that failed (a lease that lapsed, a crash).
    pub done: u64,
    pub failed: u64,
    /// The newest heartbeat of any of its runs.
    pub last_heartbeat_at: Option<Timestamp>,
}

impl LaneStats {
    /// `revoked`, `waiting` (a claim waits for work), `holding` (it holds runs), else
    /// `idle`.
    pub fn state(&self, now: Timestamp) -> &'static str {
        if self.lane.revoked_at.is_some() {
            "revoked"
        } else if self.lane.waiting_until.is_some_and(|w| w > now) {
            "waiting"
        } else if self.held > 0 {
            "holding"
        } else {
            "idle"
        }
    }

    /// When it was last heard from: a claim, a wait, a heartbeat.
    pub fn last_seen(&self) -> Option<Timestamp> {
        self.lane.last_seen_at.max(self.last_heartbeat_at)
    }

    /// Its row of `lane list --json`, `stats --json`, `gateway status --json` and the web
    /// board's lanes: every field, its state and when it was last seen (never its token).
    pub fn to_json(&self, now: Timestamp) -> serde_json::Value {
        let mut shown = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        shown["state"] = serde_json::json!(self.state(now));
        shown["last_seen_at"] = serde_json::json!(self.last_seen());
        shown
    }
}

/// The SQL list of the outcomes a lane's `failed` counts (`Outcome::counts_as_failure`),
/// for the stores' aggregates.
pub const FAILED_OUTCOMES_SQL: &str =
    "('crashed', 'timed_out', 'stale', 'protocol_violation', 'spawn_failed')";

/// Lanes (docs/lanes.md): agents outside the gateway that claim, hold and report work.
/// The board keeps each lane's name, profiles and token digest; a lane's runs carry its
/// name, so what it holds and did is counted from the runs.
pub trait LaneDesk: BoardWrites + Send + Sync {
    /// Adds a lane; refused when one of that name exists (revoked or not).
    fn create_lane(&self, lane: &Lane) -> StoreResult<()>;

    /// The lane of that name, revoked or not.
    fn lane(&self, name: &str) -> StoreResult<Option<Lane>>;

    /// The lane whose token has this digest, revoked or not.
    fn lane_by_token(&self, token_hash: &str) -> StoreResult<Option<Lane>>;

    /// Revokes a lane: its token is refused from now on and it claims nothing more.
    /// The runs it holds keep their leases, and lapse unless it reports (a revoked
    /// lane's reports on the runs it holds are refused too).
    fn revoke_lane(&self, name: &str, now: Timestamp) -> StoreResult<Lane>;

    /// Every lane with what it holds and did, by name (aggregates over its runs).
    fn lane_stats(&self) -> StoreResult<Vec<LaneStats>>;

    /// Records that a lane was heard from; `waiting_until` is when the claim it started
    /// stops waiting (`None`: it waits no more).
    fn see_lane(&self, name: &str, waiting_until: Option<Timestamp>, now: Timestamp) -> StoreResult<()>;

    /// Claims, in one transaction, the first ready task (claim order) of the lane's
    /// profiles for the lane, under a fresh run whose lease lasts `ttl`, with the checks
    /// `checks` gives that task: refused when the lane is unknown or revoked, or already
    /// holds `max_held` tasks. A task another claimer holds meanwhile is skipped, never
    /// waited on.
    fn claim_for_lane(
        &self,
        name: &str,
        ttl: i64,
        max_held: u64,
        checks: &dyn Fn(&Task) -> Checks,
        now: Timestamp,
    ) -> StoreResult<LaneClaim>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;

    #[test]
    fn names_tokens_and_admission() {
        assert!(check_name("ci-runner_2").is_ok());
        for bad in ["", "-x", "Upper", "a b", "a/b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let token = token_from([7; 32]);
        assert!(token.starts_with(TOKEN_PREFIX) && token.len() == 67);
        let lane = Lane::new("ci", &["coder".into(), "coder".into()], &token, 5).unwrap();
        assert_eq!(lane.profiles, ["coder"]);
        assert_eq!(lane.token_hash, token_hash(&token));
        assert_ne!(lane.token_hash, token_hash("kl_other"));
        assert!(!lane.token_hash.contains(&token[3..]), "the token is not kept");
        assert!(Lane::new("ci", &[], &token, 5).is_err());
        assert!(admit(&lane, 1, 2).is_ok());
        assert!(matches!(
            admit(&lane, 2, 2),
            Err(Refusal::LaneFull { held: 2, .. })
        ));
        let revoked = Lane {
            revoked_at: Some(6),
            ..lane
        };
        assert!(matches!(admit(&revoked, 0, 2), Err(Refusal::LaneRevoked(_))));
    }

    #[test]
    fn a_lane_holds_only_its_own_current_run() {
        use crate::memory::MemStore;
        use crate::{BoardReads, BoardWrites, Checks, NewTask};
        let store = MemStore::new();
        let a = Lane::new("a", &["p".into()], &token_from([1; 32]), 0).unwrap();
        let b = Lane::new("b", &["p".into()], &token_from([2; 32]), 0).unwrap();
        store.create_lane(&a).unwrap();
        store.create_lane(&b).unwrap();
        let for_p = |title: &str, profile: &str| NewTask {
            assignee: Some(profile.into()),
            ..NewTask::titled(title)
        };
        let t = store.create(&for_p("held", "p"), 0).unwrap();
        let other = store.create(&for_p("not ours", "q"), 0).unwrap();
        let LaneClaim::Claimed(c) = store
            .claim_for_lane("a", 60, 4, &|_| Checks::default(), 1)
            .unwrap()
        else {
            panic!("a ready task of p");
        };
        let task = store.get(&t.id).unwrap();
        assert!(a.serves(&task) && !a.serves(&other));
        assert_eq!(holds(&a, &task, Some(c.run_id)), Ok(c.run_id));
        assert_eq!(holds(&a, &task, None), Ok(c.run_id), "its run, unnamed");
        let not_held = |r: Result<i64, Refusal>| match r {
            Err(Refusal::NotLanesRun { run_id, .. }) => run_id,
            other => panic!("{other:?}"),
        };
        assert_eq!(not_held(holds(&a, &task, Some(c.run_id + 1))), Some(c.run_id + 1));
        assert_eq!(not_held(holds(&b, &task, Some(c.run_id))), Some(c.run_id));
        assert_eq!(not_held(holds(&b, &task, None)), None);
        assert_eq!(not_held(holds(&a, &other, None)), None, "no run at all");
    }

    #[test]
    fn a_lanes_state_and_when_it_was_last_seen() {
        let lane = Lane {
            last_seen_at: Some(4),
            ..Lane::new("a", &["p".into()], &token_from([1; 32]), 0).unwrap()
        };
        let stats = |lane: &Lane, held| LaneStats {
            lane: lane.clone(),
            held,
            done: 0,
            failed: 0,
            last_heartbeat_at: None,
        };
        assert_eq!(stats(&lane, 0).state(9), "idle");
        assert_eq!(stats(&lane, 1).state(9), "holding");
        let waiting = Lane {
            waiting_until: Some(10),
            ..lane.clone()
        };
        assert_eq!(stats(&waiting, 1).state(9), "waiting");
        assert_eq!(stats(&waiting, 0).state(10), "idle", "a wait that ended");
        let revoked = Lane {
            revoked_at: Some(3),
            ..waiting
        };
        assert_eq!(stats(&revoked, 1).state(9), "revoked");
        assert_eq!(stats(&lane, 0).last_seen(), Some(4));
        let beating = LaneStats {
            last_heartbeat_at: Some(7),
            ..stats(&lane, 1)
        };
        assert_eq!(beating.last_seen(), Some(7));
        let quiet = LaneStats {
            last_heartbeat_at: Some(2),
            ..stats(&lane, 1)
        };
        assert_eq!(quiet.last_seen(), Some(4));
    }

    #[test]
    fn the_failed_outcomes_in_sql_are_the_failures() {
        for outcome in Outcome::ALL {
            let quoted = format!("'{}'", outcome.as_str());
            assert_eq!(
                FAILED_OUTCOMES_SQL.contains(&quoted),
                outcome.counts_as_failure(),
                "{outcome:?}"
            );
        }
    }
}
