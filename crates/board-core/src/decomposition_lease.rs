//! The decomposition lease: which gateway may send a card's automatic decomposition
//! request. One rule for every store: a live lease of another holder keeps the card; a
//! lapsed one means its holder stopped mid-call, which counts as a failed attempt.

use std::fmt;
use std::str::FromStr;

use crate::types::{TaskId, Timestamp};

/// Who holds a decomposition lease: a gateway, by its host id (`gateway.host_id`) and
/// process id. Its one string form, stored and shown, is `host/pid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseHolder {
    pub host: String,
    pub pid: u32,
}

impl fmt::Display for LeaseHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.pid)
    }
}

/// Text that is not a `host/pid` lease holder.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a lease holder (host/pid): {0:?}")]
pub struct BadHolder(pub String);

impl FromStr for LeaseHolder {
    type Err = BadHolder;

    /// The last `/` ends the host: a host id may hold one, a pid never does.
    fn from_str(s: &str) -> Result<LeaseHolder, BadHolder> {
        let bad = || BadHolder(s.chars().take(80).collect());
        let (host, pid) = s.rsplit_once('/').ok_or_else(bad)?;
        let pid = pid.parse::<u32>().map_err(|_| bad())?;
        Ok(LeaseHolder {
            host: host.to_owned(),
            pid,
        })
    }
}

/// What became of a request to lease a card for an automatic decomposition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecompositionLease {
    /// The card is leased to the caller until the expiry it asked for.
    Leased,
    /// Another holder's lease on the card holds: leave the card alone.
    Held { holder: String, expires: Timestamp },
    /// An earlier lease lapsed without being released: its holder stopped mid-call, and
    /// that attempt counts as a failed one. The card is now leased to the caller, who
    /// records the failure and releases it rather than calling the model at once.
    Lapsed { holder: String },
}

/// A decomposition lease on a triage card, live or lapsed, as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriageLease {
    pub card: TaskId,
    pub holder: String,
    pub expires: Timestamp,
}

/// What leasing a card whose current lease is `current` (holder and expiry) means at
/// `now`; anything but [`DecompositionLease::Held`] writes the caller's lease. A live
/// lease of `abandoned`, a holder the caller knows is gone, counts as lapsed.
pub fn decide_lease(
    current: Option<(&str, Timestamp)>,
    now: Timestamp,
    abandoned: Option<&str>,
) -> DecompositionLease {
    match current {
        None => DecompositionLease::Leased,
        Some((holder, expires)) if expires > now && Some(holder) != abandoned => DecompositionLease::Held {
            holder: holder.to_owned(),
            expires,
        },
        Some((holder, _)) => DecompositionLease::Lapsed {
            holder: holder.to_owned(),
        },
    }
}

/// The expiry of a lease taken at `now` for `ttl` seconds (at least one).
pub fn lease_expiry(ttl: i64, now: Timestamp) -> Timestamp {
    now.saturating_add(ttl.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_holder_has_one_string_form() {
        let holder = LeaseHolder {
            host: "rack/3".into(),
            pid: 4021,
        };
        assert_eq!(holder.to_string(), "rack/3/4021");
        assert_eq!("rack/3/4021".parse::<LeaseHolder>(), Ok(holder));
        for bad in ["", "host", "host/", "host/-1", "host/x"] {
            assert!(bad.parse::<LeaseHolder>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_live_lease_holds_and_a_lapsed_one_is_taken_over() {
        assert_eq!(decide_lease(None, 100, None), DecompositionLease::Leased);
        assert_eq!(
            decide_lease(Some(("a", 101)), 100, Some("b")),
            DecompositionLease::Held {
                holder: "a".into(),
                expires: 101
            }
        );
        assert_eq!(
            decide_lease(Some(("a", 100)), 100, None),
            DecompositionLease::Lapsed { holder: "a".into() }
        );
        assert_eq!(
            decide_lease(Some(("a", 101)), 100, Some("a")),
            DecompositionLease::Lapsed { holder: "a".into() },
            "a holder known to be gone loses its lease at once"
        );
        assert_eq!(lease_expiry(0, 100), 101);
    }
}
