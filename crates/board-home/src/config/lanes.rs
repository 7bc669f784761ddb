//! `lanes.*`: what a lane (docs/lanes.md) may hold and how long it waits.

use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

use super::{fields, MAX_CLAIM_TTL_SECONDS, MAX_FAILURE_LIMIT, MAX_WAITING_CLAIMS};

/// `lanes.*`: what a lane (docs/lanes.md) may hold and how long it waits.
#[derive(Clone, Debug, PartialEq, Eq, SmartDefault, Serialize, Deserialize)]
#[serde(default)]
pub struct LanesConfig {
    /// `lanes.max_held`: tasks one lane may hold at once, so no lane starves the others.
    #[default = 4]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_FAILURE_LIMIT>")]
    pub max_held: u64,
    /// `lanes.lease_seconds`: a lane's claim lasts this long unless it heartbeats.
    #[default = 600]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_CLAIM_TTL_SECONDS>")]
    pub lease_seconds: i64,
    /// `lanes.max_wait_seconds`: the longest a claim waits for work (`--wait`, `?wait=`).
    #[default = 300]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_CLAIM_TTL_SECONDS>")]
    pub max_wait_seconds: i64,
    /// `lanes.max_waiting`: claims `kanban serve` lets wait at once (each holds a
    /// connection, beyond the server's own 512); one more is answered 503.
    #[default = 1000]
    #[serde(deserialize_with = "fields::positive::<_, _, MAX_WAITING_CLAIMS>")]
    pub max_waiting: u64,
}
