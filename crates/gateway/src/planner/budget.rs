//! What a tick may start: the decompositions the cost safety and the limits allow, and
//! the workers `max_spawn` has room for. The read sizes its windows by the same budgets.

use board_core::Timestamp;

use super::{DispatchSettings, View};

/// What the provider breaker and the spend ceilings let a tick's decomposition step
/// start (docs/decomposer.md#cost-safety).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowance {
    /// Up to this many new decompositions: the per-tick and in-flight limits, one in
    /// flight while the provider is in doubt, and no more than the request ceiling has
    /// room for.
    Cards(usize),
    /// The breaker is open and its probe is due: one decomposition, as its probe.
    Probe,
    /// None at all, and why.
    Nothing(String),
}

/// How many decompositions a tick may start with `in_flight` running, at most
/// `concurrency` at once: the one budget the read sizes its window by and the plan spends.
pub fn decomposition_room(settings: &DispatchSettings, concurrency: usize, in_flight: usize) -> usize {
    concurrency
        .saturating_sub(in_flight)
        .min(settings.auto_decompose_per_tick)
}

/// How many workers a tick may start while `held` live ones are held.
pub fn spawn_room(settings: &DispatchSettings, held: usize) -> usize {
    settings.max_spawn.saturating_sub(held)
}

/// The cost safety's step of the plan: what may start now, and the spend ceiling the
/// last 24 hours have reached (`None`: none).
pub fn allowance(view: &View, now: Timestamp, settings: &DispatchSettings) -> (Allowance, Option<String>) {
    let ceiling = settings.ceilings.reached(&view.spend);
    if let Some(reached) = &ceiling {
        return (
            Allowance::Nothing(format!("spend ceiling reached: {reached}")),
            ceiling,
        );
    }
    let breaker = &view.breaker;
    let in_flight = view.in_flight.len();
    if breaker.open {
        let allowed = if !breaker.probe_due(now, settings.config_stamp.as_deref()) {
            Allowance::Nothing(format!(
                "provider breaker open until {}",
                breaker.probe_at.unwrap_or(now)
            ))
        } else if in_flight > 0 {
            Allowance::Nothing("provider breaker open; a decomposition is still in flight".into())
        } else {
            Allowance::Probe
        };
        return (allowed, None);
    }
    let concurrency = if breaker.in_doubt() {
        1
    } else {
        settings.auto_decompose_concurrency
    };
    let mut room = decomposition_room(settings, concurrency, in_flight);
    if let Some(left) = settings.ceilings.request_room(&view.spend, in_flight) {
        room = room.min(left);
    }
    (Allowance::Cards(room), None)
}
