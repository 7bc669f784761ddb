//! The kanban board's pure core: its vocabulary, every transition of its state machine,
//! the invariants, and the store's roles (`Store` is all of them) every backend implements.
//!
//! Nothing here does I/O, reads a clock or draws a random number: time and new ids are
//! arguments. A store reads the facts of a task, asks [`transition::decide`] (or
//! [`graph`], [`plan`]) what to do, and applies the answer atomically.
//!
//! ```
//! use board_core::{memory::MemStore, BoardWrites, NewTask, Status};
//!
//! let board = MemStore::new();
//! let task = board.create(&NewTask::titled("write the release notes"), 1_700_000_000).unwrap();
//! assert_eq!(task.status, Status::Ready);
//! let claim = board.claim(&task.id, 900, 1_700_000_001).unwrap();
//! assert_eq!(claim.task.status, Status::Running);
//! ```

mod aggregates;
pub mod attachments;
pub mod backoff;
pub mod breaker;
pub mod card_actions;
mod checks;
pub mod comment;
pub mod copy;
mod decomposition_lease;
pub mod graph;
pub mod import;
pub mod invariants;
pub mod kinds;
pub mod lanes;
pub mod limits;
pub mod memory;
pub mod notify;
pub mod plan;
pub mod recurrence;
pub mod refusal;
pub mod retention;
pub mod row;
pub mod shapes;
pub mod spend;
pub mod store;
pub mod template;
pub mod transition;
pub mod types;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use attachments::{Attachment, AttachmentShelf, NewAttachment};
pub use backoff::AttemptFloor;
pub use breaker::{Breaker, BreakerChange, BreakerSettings, BreakerSignal, Fault};
pub use decomposition_lease::{decide_lease, lease_expiry, BadHolder, LeaseHolder};
pub use graph::{clean_title, NewTask};
pub use import::{ImportBatch, ImportOutcome, ImportedTask, Landed, LinkLanded};
pub use invariants::{check_invariants, check_step, Violation};
pub use kinds::{EventKind, DECOMPOSITION_EVENTS, READY_AGAIN_EVENTS, VERDICT_EVENTS};
pub use lanes::{Lane, LaneClaim, LaneStats};
pub use plan::{BadFanout, Mode, Plan, PlanBasis, PlanSettings, PlannedTask};
pub use recurrence::{Every, Recurrence, Recurring};
pub use refusal::Refusal;
pub use retention::{rest_after, sweep, Compacted, Freed, GcBatch, Pacer, Sweep, Swept, ROUTINE_EVENTS};
pub use spend::{Ceilings, Prices, Spend};
pub use store::{
    after_cursor, BoardImport, BoardReads, BoardStats, BoardWrites, Claim, Committed, Completion, Creation,
    CursorRange, DecompositionLease, DispatchQueue, EventFilter, LaneDesk, LlmLedger, NoWorkers, Offer,
    ReclaimOutcome, Retention, RetryPolicy, RunEnd, Store, StoreError, StoreResult, TaskFilter, Termination,
    Terminator, TriageLease, TriageQueue, Verdict, Visit,
};
pub use template::{GraphWrites, Template};
pub use transition::{wakes_dispatcher, ByHand, Claiming, Request, TaskFacts, BLOCK_RECURRENCE_LIMIT};
pub use types::{
    BadLease, BlockKind, BoardSnapshot, Checks, Comment, DaySpend, Event, Finished, Lease, LeaseColumns,
    Link, LlmCall, LlmOutcome, LlmPurpose, Outcome, Run, RunId, RunKind, RunStatus, Status, StatusCount,
    Tally, Task, TaskId, TaskOrder, Timestamp,
};
