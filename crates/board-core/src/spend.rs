//! What the model calls cost (docs/decomposer.md#spend-ceilings): the `llm_calls` ledger
//! summed over a window ([`Spend`], read by a store in one aggregate query), the cost of
//! one call at the configured prices ([`Prices`]), and the daily ceilings ([`Ceilings`])
//! that stop automatic decomposition, counted over the rolling 24 hours before `now`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::types::Timestamp;

/// The window the ceilings count over.
pub const SPEND_WINDOW_SECONDS: i64 = 24 * 3600;

/// Where the window that ends at `now` starts.
pub fn window_start(now: Timestamp) -> Timestamp {
    now - SPEND_WINDOW_SECONDS
}

/// The ledger summed over the calls started at or after some time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Spend {
    pub requests: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// The sum of the rows' costs; `None` when no row carries one.
    pub cost: Option<f64>,
    /// Requests sent past a ceiling (`kanban decompose --over-budget`).
    pub over_budget: i64,
    /// Requests by `llm_calls.outcome` (`ok`, `http_error`, `timeout`, ...).
    pub by_outcome: BTreeMap<String, i64>,
}

impl Spend {
    /// Tokens in and out.
    pub fn tokens(&self) -> i64 {
        self.prompt_tokens + self.completion_tokens
    }

    /// Adds one group of rows (one outcome) to the sum.
    pub fn add(&mut self, outcome: String, group: &Spend) {
        self.requests += group.requests;
        self.prompt_tokens += group.prompt_tokens;
        self.completion_tokens += group.completion_tokens;
        self.over_budget += group.over_budget;
        if let Some(cost) = group.cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        }
        *self.by_outcome.entry(outcome).or_default() += group.requests;
    }
}

/// The decomposer model's prices, per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Prices {
    pub per_million_input: Option<f64>,
    pub per_million_output: Option<f64>,
}

impl Prices {
    /// What a call cost, when a price is set; a missing count is none.
    ///
    /// ```
    /// use board_core::spend::Prices;
    ///
    /// let prices = Prices { per_million_input: Some(2.0), per_million_output: Some(10.0) };
    /// assert_eq!(prices.cost(Some(500_000), Some(100_000)), Some(2.0));
    /// assert_eq!(Prices::default().cost(Some(1), Some(1)), None);
    /// ```
    pub fn cost(&self, prompt_tokens: Option<i64>, completion_tokens: Option<i64>) -> Option<f64> {
        if self.per_million_input.is_none() && self.per_million_output.is_none() {
            return None;
        }
        let part =
            |tokens: Option<i64>, price: Option<f64>| tokens.unwrap_or(0) as f64 * price.unwrap_or(0.0) / 1e6;
        Some(part(prompt_tokens, self.per_million_input) + part(completion_tokens, self.per_million_output))
    }
}

/// The daily ceilings (`auxiliary.kanban_decomposer.max_*_per_day`); each is optional.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Ceilings {
    pub max_requests_per_day: Option<i64>,
    pub max_tokens_per_day: Option<i64>,
    pub max_cost_per_day: Option<f64>,
}

impl Ceilings {
    /// The first ceiling the last 24 hours' spend has reached, in words, e.g.
    /// `max_requests_per_day (5 requests in the last 24 h, ceiling 5)`.
    pub fn reached(&self, spend: &Spend) -> Option<String> {
        if let Some(max) = self.max_requests_per_day.filter(|max| spend.requests >= *max) {
            return Some(format!(
                "max_requests_per_day ({} requests in the last 24 h, ceiling {max})",
                spend.requests
            ));
        }
        if let Some(max) = self.max_tokens_per_day.filter(|max| spend.tokens() >= *max) {
            return Some(format!(
                "max_tokens_per_day ({} tokens in the last 24 h, ceiling {max})",
                spend.tokens()
            ));
        }
        let cost = spend.cost.unwrap_or(0.0);
        self.max_cost_per_day
            .filter(|max| cost >= *max)
            .map(|max| format!("max_cost_per_day ({cost:.4} spent in the last 24 h, ceiling {max})"))
    }

    /// How many more requests may start while `in_flight` calls may each still send
    /// one; `None` when requests are not capped.
    pub fn request_room(&self, spend: &Spend, in_flight: usize) -> Option<usize> {
        let max = self.max_requests_per_day?;
        let left = max - spend.requests - in_flight as i64;
        Some(usize::try_from(left).unwrap_or(0))
    }

    /// The ceilings and how much of each the window has used, as JSON.
    pub fn json(&self, spend: &Spend) -> Value {
        json!({
            "max_requests_per_day": self.max_requests_per_day,
            "max_tokens_per_day": self.max_tokens_per_day,
            "max_cost_per_day": self.max_cost_per_day,
            "reached": self.reached(spend),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ceiling_stops_at_its_own_count() {
        let spend = Spend {
            requests: 5,
            prompt_tokens: 900,
            completion_tokens: 100,
            cost: Some(0.25),
            ..Spend::default()
        };
        assert_eq!(Ceilings::default().reached(&spend), None);
        let requests = Ceilings {
            max_requests_per_day: Some(5),
            ..Ceilings::default()
        };
        assert!(requests
            .reached(&spend)
            .is_some_and(|r| r.starts_with("max_requests_per_day")));
        assert_eq!(requests.request_room(&Spend::default(), 2), Some(3));
        assert_eq!(requests.request_room(&spend, 2), Some(0));
        let tokens = Ceilings {
            max_tokens_per_day: Some(1001),
            ..Ceilings::default()
        };
        assert_eq!(tokens.reached(&spend), None);
        let cost = Ceilings {
            max_cost_per_day: Some(0.25),
            ..Ceilings::default()
        };
        assert!(cost
            .reached(&spend)
            .is_some_and(|r| r.starts_with("max_cost_per_day")));
    }

    /// The token ceiling counts both sides of the bill: tokens in alone, or tokens out
    /// alone, reach it.
    #[test]
    fn a_token_ceiling_is_reached_by_either_side_alone() {
        let tokens = Ceilings {
            max_tokens_per_day: Some(1000),
            ..Ceilings::default()
        };
        let spent = |prompt_tokens, completion_tokens| Spend {
            requests: 1,
            prompt_tokens,
            completion_tokens,
            ..Spend::default()
        };
        for (prompt, completion) in [(1000, 0), (0, 1000), (600, 400)] {
            let reached = tokens.reached(&spent(prompt, completion));
            assert!(
                reached
                    .as_deref()
                    .is_some_and(|r| r.starts_with("max_tokens_per_day (1000 tokens")),
                "{prompt} in, {completion} out: {reached:?}"
            );
        }
        for (prompt, completion) in [(999, 0), (0, 999), (500, 499)] {
            assert_eq!(tokens.reached(&spent(prompt, completion)), None);
        }
    }

    /// The cost ceiling counts both prices: the input price alone, or the output price
    /// alone, reaches it, and with both set a call costs the sum of its two parts.
    #[test]
    fn a_cost_ceiling_is_reached_by_either_price_alone() {
        let ceiling = Ceilings {
            max_cost_per_day: Some(1.0),
            ..Ceilings::default()
        };
        let spent = |prices: Prices, prompt: i64, completion: i64| Spend {
            requests: 1,
            prompt_tokens: prompt,
            completion_tokens: completion,
            cost: prices.cost(Some(prompt), Some(completion)),
            ..Spend::default()
        };
        let input_only = Prices {
            per_million_input: Some(2.0),
            per_million_output: None,
        };
        let output_only = Prices {
            per_million_input: None,
            per_million_output: Some(4.0),
        };
        let both = Prices {
            per_million_input: Some(2.0),
            per_million_output: Some(4.0),
        };
        assert_eq!(input_only.cost(Some(500_000), Some(250_000)), Some(1.0));
        assert_eq!(output_only.cost(Some(500_000), Some(250_000)), Some(1.0));
        assert_eq!(both.cost(Some(500_000), Some(250_000)), Some(2.0));
        for (prices, prompt, completion) in [
            (input_only, 500_000, 0),
            (output_only, 0, 250_000),
            (both, 250_000, 125_000),
        ] {
            let spend = spent(prices, prompt, completion);
            assert!(
                ceiling
                    .reached(&spend)
                    .is_some_and(|r| r.starts_with("max_cost_per_day (1.0000 spent")),
                "{prices:?} with {prompt} in, {completion} out: {spend:?}"
            );
            let under = spent(prices, prompt * 9 / 10, completion * 9 / 10);
            assert_eq!(ceiling.reached(&under), None, "{prices:?}: {under:?}");
        }
    }

    #[test]
    fn the_window_is_the_day_before_now_and_its_json_names_every_ceiling() {
        assert_eq!(window_start(1_000_000), 1_000_000 - 86_400);
        let ceilings = Ceilings {
            max_requests_per_day: Some(5),
            max_tokens_per_day: None,
            max_cost_per_day: Some(1.5),
        };
        let spend = Spend {
            requests: 5,
            ..Spend::default()
        };
        assert_eq!(
            ceilings.json(&spend),
            json!({
                "max_requests_per_day": 5,
                "max_tokens_per_day": null,
                "max_cost_per_day": 1.5,
                "reached": "max_requests_per_day (5 requests in the last 24 h, ceiling 5)",
            })
        );
    }

    #[test]
    fn groups_add_up() {
        let mut sum = Spend::default();
        let ok = Spend {
            requests: 2,
            prompt_tokens: 10,
            cost: Some(1.5),
            ..Spend::default()
        };
        let failed = Spend {
            requests: 3,
            ..Spend::default()
        };
        sum.add("ok".into(), &ok);
        sum.add("http_error".into(), &failed);
        assert_eq!((sum.requests, sum.prompt_tokens, sum.cost), (5, 10, Some(1.5)));
        assert_eq!(sum.by_outcome["http_error"], 3);
    }
}
