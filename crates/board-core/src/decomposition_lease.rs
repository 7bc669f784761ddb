//! The decomposition lease: which gateway may send a card's automatic decomposition
//! request. One rule for every store: a live lease of another holder keeps the card; a
//! lapsed one means its holder stopped mid-call, which counts as a failed attempt.

use crate::store::DecompositionLease;
use crate::types::Timestamp;

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
