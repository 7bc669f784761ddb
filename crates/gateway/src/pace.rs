//! A token bucket: a burst at once, then a steady rate. A worker's reports through its
//! channel are paced with one.

use std::time::Instant;

/// Up to `burst` at once, then `per_second`.
#[derive(Debug)]
pub(crate) struct Pace {
    tokens: f64,
    at: Instant,
    per_second: f64,
    burst: f64,
}

impl Pace {
    /// A full bucket at `now`.
    pub(crate) fn new(now: Instant, per_second: f64, burst: f64) -> Pace {
        Pace {
            tokens: burst,
            at: now,
            per_second,
            burst,
        }
    }

    fn refill(&mut self, now: Instant) {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = self.at.max(now);
    }

    /// Whether something arriving `now` may go, spending one token if so.
    pub(crate) fn admit(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_goes_at_once_a_flood_is_paced() {
        let start = Instant::now();
        let mut pace = Pace::new(start, 20.0, 100.0);
        let burst = (0..1000).take_while(|_| pace.admit(start)).count();
        assert_eq!(burst, 100);
        assert!(!pace.admit(start + Duration::from_millis(10)));
        // A second later, a second's worth more.
        let later = start + Duration::from_secs(1);
        let refilled = (0..1000).take_while(|_| pace.admit(later)).count();
        assert_eq!(refilled, 20);
        // Never more than the burst, however long it was quiet.
        let much_later = later + Duration::from_secs(3600);
        assert_eq!((0..1000).take_while(|_| pace.admit(much_later)).count(), 100);
    }
}
