//! What the tick decides with, from the configuration (re-read every tick).

use std::collections::BTreeMap;

use board_core::{Ceilings, Checks, RetryPolicy, Task};

/// What a profile lets its workers have beyond the defaults (`profiles.<p>.*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Boundary {
    /// Variables passed to workers although their names look secret (`env_allow`).
    pub env_allow: Vec<String>,
    /// Card text may start an argument with `-` (`allow_dash_arguments`).
    pub dash_arguments: bool,
    /// The system user the workers run as (`user`); `None`: the gateway's own.
    pub user: Option<String>,
}

/// What a profile's work must pass before it counts, and how many of its workers may
/// run at once (`profiles.<p>.verify`, `review`, `reviewer`, `contract`,
/// `max_concurrent`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gates {
    /// The verifiers run on the profile's reported work.
    pub verify: Vec<Vec<String>>,
    /// Its verified work waits for a reviewer (`review: required`).
    pub review: bool,
    /// The profile that reviews its work (`reviewer:`), required or asked for.
    pub reviewer: Option<String>,
    /// A completion without evidence is refused (`contract: evidence`).
    pub evidence: bool,
    /// A worker's exit 0 with output completes its task (`contract: auto`).
    pub auto: bool,
    /// Its workers (work and reviews) held at once (its own `max_concurrent`, else
    /// `kanban.max_in_progress_per_profile`); `None`: only `max_spawn` bounds them.
    pub max_concurrent: Option<usize>,
}

/// When a worker's log is rotated before the worker starts
/// (`kanban.worker_log_rotate_bytes`, `worker_log_backup_count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRotation {
    /// A log longer than this is rotated.
    pub bytes: u64,
    /// Rotated logs kept: `ID.log.1` the newest; 0 keeps none.
    pub backups: u32,
}

impl Default for LogRotation {
    fn default() -> LogRotation {
        LogRotation {
            bytes: 2 * 1024 * 1024,
            backups: 1,
        }
    }
}

/// What the tick needs from the configuration, re-read every tick.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchSettings {
    pub max_spawn: usize,
    pub auto_decompose: bool,
    pub auto_decompose_per_tick: usize,
    pub auto_decompose_concurrency: usize,
    pub failure_limit: i64,
    /// `kanban.verify_failure_limit`: failed verifications before a task is blocked.
    pub verify_failure_limit: i64,
    /// `kanban.review_round_limit`: rounds of requested changes before a review loop.
    pub review_round_limit: i64,
    pub claim_ttl_seconds: i64,
    /// `kanban.max_text_bytes`: the largest result or comment a worker may report.
    pub max_text_bytes: usize,
    pub default_assignee: String,
    /// Profile name -> its worker command (`None`: the profile cannot be spawned).
    pub commands: BTreeMap<String, Option<Vec<String>>>,
    /// The profiles lanes serve (`profiles.<p>.external`): never spawned, their ready
    /// tasks left to lanes without a `skipped_nonspawnable` note.
    pub external: Vec<String>,
    /// Variables kept from workers whatever their names (the model key's variable).
    pub secret_vars: Vec<String>,
    /// Profile name -> what its workers may have beyond the defaults.
    pub boundaries: BTreeMap<String, Boundary>,
    /// Profile name -> what its work must pass and how many of its workers may run.
    pub gates: BTreeMap<String, Gates>,
    /// The argv of a verify run's worker, which runs the verifiers and reports their
    /// verdict (`kanban verify`); `None`: this process cannot verify, and leaves
    /// verifications to a gateway that can.
    pub verifier: Option<Vec<String>>,
    /// `kanban.verify_timeout_seconds`: the longest one verifier runs.
    pub verify_timeout_seconds: i64,
    /// `kanban.decompose_retry_base_seconds` and `decompose_failure_limit`.
    pub decompose_retry: RetryPolicy,
    /// How long a card is leased to this gateway for its automatic decomposition.
    pub decomposition_lease_seconds: i64,
    /// Whether the board is the home's `kanban.db` (workers are told its path), not a
    /// PostgreSQL board (`database_url`), whose URL no worker gets.
    pub home_board: bool,
    /// When a worker's log is rotated.
    pub worker_log: LogRotation,
    /// `kanban.dispatch_stale_timeout_seconds`: a worker running this long with no
    /// heartbeat for an hour is stopped and its run ends `stale`; 0 turns the rule off.
    pub stale_timeout_seconds: i64,
    /// The daily spend ceilings of the decomposer.
    pub ceilings: Ceilings,
    /// The stamp of the config in force (a changed config lets a probe through a breaker
    /// an authentication fault holds open).
    pub config_stamp: Option<String>,
}

impl DispatchSettings {
    /// How long before its expiry the lease of a held live worker is extended: half the
    /// claim's lease, so that another gateway never finds it expired while its worker
    /// lives.
    pub fn lease_margin(&self) -> i64 {
        self.claim_ttl_seconds / 2
    }

    /// The gates of a task's profile.
    pub fn gates_for(&self, profile: &str) -> Option<&Gates> {
        self.gates.get(profile)
    }

    /// The verifiers of a task's reported work: its own, else its profile's.
    pub fn verifiers_for(&self, task: &Task) -> Vec<Vec<String>> {
        if let Some(own) = &task.verify {
            return own.clone();
        }
        let profile = self.profile_of(task);
        self.gates_for(&profile)
            .map(|g| g.verify.clone())
            .unwrap_or_default()
    }

    /// What a work run of `task` must pass, fixed at its claim.
    pub fn checks_for(&self, task: &Task) -> Checks {
        let profile = self.profile_of(task);
        let gates = self.gates_for(&profile).cloned().unwrap_or_default();
        Checks {
            verify: !self.verifiers_for(task).is_empty(),
            review: gates.review,
            reviewer: gates.reviewer,
            evidence: gates.evidence,
        }
    }

    fn profile_of(&self, task: &Task) -> String {
        task.assignee
            .clone()
            .unwrap_or_else(|| self.default_assignee.clone())
    }

    /// The profile a task's worker runs as, and its command; `None` for a profile that
    /// cannot be spawned.
    pub fn worker_for(&self, task: &Task) -> (String, Option<Vec<String>>) {
        let profile = self.profile_of(task);
        let command = self.commands.get(&profile).cloned().flatten();
        (profile, command)
    }
}
