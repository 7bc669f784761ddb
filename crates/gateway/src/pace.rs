//! A token bucket: a burst at once, then a steady rate. A worker's reports through its
//! channel are paced with one, and so are the ticks the board's wake-ups start.

use std::time::{Duration, Instant};

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

    /// How long something arriving `now` waits for its turn (zero when a token is
    /// there), the token spent either way: things that wait go one after another.
    pub(crate) fn take(&mut self, now: Instant) -> Duration {
        if self.admit(now) {
            return Duration::ZERO;
        }
        // The bucket is counted from `at`, which is later than `now` while others wait.
        let turn = self.at + Duration::from_secs_f64((1.0 - self.tokens) / self.per_second);
        self.tokens = 0.0;
        self.at = turn;
        turn.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn past_the_burst_each_waits_its_turn() {
        let start = Instant::now();
        let mut pace = Pace::new(start, 50.0, 4.0);
        let waits: Vec<Duration> = (0..7).map(|_| pace.take(start)).collect();
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 0, 0, 0, 20, 40, 60]);
        // After a quiet spell the burst is back.
        let quiet = start + Duration::from_secs(10);
        assert_eq!(pace.take(quiet), Duration::ZERO);
    }
}
