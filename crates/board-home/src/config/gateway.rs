//! `gateway.*` of the config.

use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

use super::fields;

/// `gateway.*`.
#[derive(Clone, Debug, SmartDefault, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    /// `gateway.host_id`: the name this machine's gateway records on every run it starts;
    /// only the gateway of that host signals, adopts or classifies the run's worker.
    /// Unset: the hostname ([`crate::default_host_id`]).
    #[serde(deserialize_with = "fields::host_id", skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// `gateway.metrics_bind`: the address of `/healthz` and `/metrics`; empty: off.
    #[serde(deserialize_with = "fields::bind")]
    pub metrics_bind: String,
    /// `gateway.notify_timeout_seconds`: how long a webhook has to answer a delivery.
    #[default(10)]
    #[serde(deserialize_with = "fields::positive::<_, _, 120>")]
    pub notify_timeout_seconds: u64,
    /// `gateway.boards`: the boards of the home this gateway serves; empty: every one.
    pub boards: Vec<crate::BoardSlug>,
}

impl GatewayConfig {
    /// The metrics address, when there is one (the value was checked when read).
    pub fn metrics_bind(&self) -> Option<std::net::SocketAddr> {
        self.metrics_bind.parse().ok()
    }

    /// `gateway.host_id`, else the hostname.
    pub fn host_id(&self) -> String {
        self.host_id.clone().unwrap_or_else(crate::default_host_id)
    }
}
