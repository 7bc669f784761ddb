//! The operations of the property test and their generators: every write the `Store` trait
//! offers, with how its target is picked.

pub use super::checks::CheckVerdict;
use crate::plan::Mode;
use crate::types::{BlockKind, Outcome};
use proptest::prelude::*;

/// Chooses the task an operation acts on: usually one the operation fits (a running task
/// for a heartbeat, a triage card for a decomposition; the step is skipped when none
/// does), sometimes any task, to exercise the refusals.
#[derive(Clone, Copy, Debug)]
pub struct Pick {
    pub(super) fitting: bool,
    pub(super) index: usize,
}

/// Which run a guarded call names.
#[derive(Clone, Copy, Debug)]
pub enum Guard {
    None,
    Current,
    Stale,
}

/// What an edit changes.
#[derive(Clone, Copy, Debug)]
pub enum EditKind {
    Title,
    Body,
    Priority,
    Nothing,
    BlankTitle,
}

/// One step of a random operation sequence. `stale` asks a supervisor's call to name a
/// claim lock other than the current one.
#[derive(Clone, Debug)]
pub enum Op {
    Create {
        parents: Vec<Pick>,
        triage: bool,
        priority: i64,
        key: Option<u8>,
    },
    Claim(Pick),
    /// A ready task's work claimed with checks: verifiers, a required review.
    ClaimChecked(Pick, bool, bool),
    /// A verification or a review claimed, as the task's status asks.
    ClaimCheck(Pick),
    /// A verify run's verdict: passed or not; with `true`, naming a stale claim lock.
    Verdict(Pick, bool, bool),
    ReviewVerdict(Pick, CheckVerdict, Guard),
    RequestReview(Pick, Guard),
    ReopenReview(Pick),
    /// With `true`, the heartbeat names a run that is not current.
    Heartbeat(Pick, bool),
    /// With `true`, the completion carries a summary.
    Complete(Pick, Guard, bool),
    Replay(Pick),
    Block(Pick, Option<BlockKind>, Guard),
    Unblock(Pick),
    Reclaim(Pick, Guard),
    DeferReclaim(Pick, Guard),
    EndRun {
        task: Pick,
        outcome: Outcome,
        failure_limit: i64,
        stale: bool,
    },
    /// With `true`, the dispatcher names a stale claim lock.
    ExtendClaim(Pick, bool),
    /// With `true`, the dispatcher names a stale claim lock.
    SetWorker(Pick, bool),
    SkipNonspawnable(Pick),
    Archive(Pick),
    Edit(Pick, EditKind),
    /// With `true`, to an assignee; with `false`, unassigned.
    Assign(Pick, bool),
    /// With `true`, a blank comment (refused); guarded by a run or not.
    Comment(Pick, bool, Guard),
    Link(Pick, Pick),
    Unlink(Pick),
    Promote(Pick),
    PromoteReady,
    Decompose {
        task: Pick,
        children: usize,
        edge: bool,
        mode: Mode,
        auto_promote: bool,
        stale_basis: bool,
    },
    /// With the failure limit of the retry policy.
    DecomposeFailed(Pick, i64),
    ClearDecomposeFailures(Pick),
    RecordLlmCall(Pick),
}

/// Every kind of operation, as `Op::kind` names it.
pub(super) const KINDS: &[&str] = &[
    "create",
    "claim",
    "claim checked",
    "claim check",
    "verdict",
    "review verdict",
    "request review",
    "reopen review",
    "heartbeat",
    "complete",
    "replay",
    "block",
    "unblock",
    "reclaim",
    "defer reclaim",
    "end run",
    "extend claim",
    "set worker",
    "skip nonspawnable",
    "archive",
    "edit",
    "assign",
    "comment",
    "link",
    "unlink",
    "promote",
    "promote ready",
    "decompose",
    "decompose failed",
    "clear decompose failures",
    "record llm call",
];

impl Op {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Op::Create { .. } => "create",
            Op::Claim(_) => "claim",
            Op::ClaimChecked(..) => "claim checked",
            Op::ClaimCheck(_) => "claim check",
            Op::Verdict(..) => "verdict",
            Op::ReviewVerdict(..) => "review verdict",
            Op::RequestReview(..) => "request review",
            Op::ReopenReview(_) => "reopen review",
            Op::Heartbeat(..) => "heartbeat",
            Op::Complete(..) => "complete",
            Op::Replay(_) => "replay",
            Op::Block(..) => "block",
            Op::Unblock(_) => "unblock",
            Op::Reclaim(..) => "reclaim",
            Op::DeferReclaim(..) => "defer reclaim",
            Op::EndRun { .. } => "end run",
            Op::ExtendClaim(..) => "extend claim",
            Op::SetWorker(..) => "set worker",
            Op::SkipNonspawnable(_) => "skip nonspawnable",
            Op::Archive(_) => "archive",
            Op::Edit(..) => "edit",
            Op::Assign(..) => "assign",
            Op::Comment(..) => "comment",
            Op::Link(..) => "link",
            Op::Unlink(_) => "unlink",
            Op::Promote(_) => "promote",
            Op::PromoteReady => "promote ready",
            Op::Decompose { .. } => "decompose",
            Op::DecomposeFailed(..) => "decompose failed",
            Op::ClearDecomposeFailures(_) => "clear decompose failures",
            Op::RecordLlmCall(_) => "record llm call",
        }
    }
}

fn pick() -> impl Strategy<Value = Pick> {
    (proptest::bool::weighted(0.85), 0usize..64).prop_map(|(fitting, index)| Pick { fitting, index })
}

fn guard() -> impl Strategy<Value = Guard> {
    prop_oneof![2 => Just(Guard::None), 4 => Just(Guard::Current), 1 => Just(Guard::Stale)]
}

fn stale() -> impl Strategy<Value = bool> {
    proptest::bool::weighted(0.15)
}

fn create() -> impl Strategy<Value = Op> {
    (
        proptest::collection::vec(pick(), 0..3),
        proptest::bool::weighted(0.3),
        -2i64..3,
        proptest::option::weighted(0.1, 0u8..3),
    )
        .prop_map(|(parents, triage, priority, key)| Op::Create {
            parents,
            triage,
            priority,
            key,
        })
}

/// The operations of a worker and of a person on one task.
fn task_op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(None),
        Just(Some(BlockKind::Dependency)),
        Just(Some(BlockKind::NeedsInput)),
        Just(Some(BlockKind::Capability)),
        Just(Some(BlockKind::Transient)),
    ];
    let edit = prop_oneof![
        3 => Just(EditKind::Title),
        1 => Just(EditKind::Body),
        2 => Just(EditKind::Priority),
        1 => Just(EditKind::Nothing),
        1 => Just(EditKind::BlankTitle),
    ];
    prop_oneof![
        6 => create(),
        9 => pick().prop_map(Op::Claim),
        2 => (pick(), stale()).prop_map(|(p, s)| Op::Heartbeat(p, s)),
        3 => (pick(), guard(), any::<bool>()).prop_map(|(p, g, s)| Op::Complete(p, g, s)),
        2 => pick().prop_map(Op::Replay),
        3 => (pick(), kind, guard()).prop_map(|(p, k, g)| Op::Block(p, k, g)),
        2 => pick().prop_map(Op::Unblock),
        1 => pick().prop_map(Op::Archive),
        2 => (pick(), edit).prop_map(|(p, e)| Op::Edit(p, e)),
        1 => (pick(), any::<bool>()).prop_map(|(p, some)| Op::Assign(p, some)),
        1 => (pick(), proptest::bool::weighted(0.2), guard()).prop_map(|(p, blank, g)| Op::Comment(p, blank, g)),
        2 => (pick(), pick()).prop_map(|(a, b)| Op::Link(a, b)),
        1 => pick().prop_map(Op::Unlink),
    ]
}

/// The dispatcher's and the decomposer's operations.
fn supervisor_op() -> impl Strategy<Value = Op> {
    let outcome = prop_oneof![
        3 => Just(Outcome::Crashed),
        1 => Just(Outcome::TimedOut),
        1 => Just(Outcome::Stale),
        1 => Just(Outcome::RateLimited),
        1 => Just(Outcome::ProtocolViolation),
        1 => Just(Outcome::SpawnFailed),
        1 => Just(Outcome::Completed),
    ];
    let mode = prop_oneof![Just(Mode::Manual), Just(Mode::Automatic)];
    prop_oneof![
        2 => (pick(), guard()).prop_map(|(p, g)| Op::Reclaim(p, g)),
        1 => (pick(), guard()).prop_map(|(p, g)| Op::DeferReclaim(p, g)),
        2 => (pick(), outcome, 1i64..4, stale()).prop_map(|(task, outcome, failure_limit, stale)| {
            Op::EndRun { task, outcome, failure_limit, stale }
        }),
        1 => (pick(), stale()).prop_map(|(p, s)| Op::ExtendClaim(p, s)),
        2 => (pick(), stale()).prop_map(|(p, s)| Op::SetWorker(p, s)),
        1 => pick().prop_map(Op::SkipNonspawnable),
        2 => pick().prop_map(Op::Promote),
        2 => Just(Op::PromoteReady),
        3 => (pick(), 0usize..5, any::<bool>(), mode, any::<bool>(), proptest::bool::weighted(0.1))
            .prop_map(|(task, children, edge, mode, auto_promote, stale_basis)| Op::Decompose {
                task, children, edge, mode, auto_promote, stale_basis,
            }),
        2 => (pick(), 1i64..4).prop_map(|(p, limit)| Op::DecomposeFailed(p, limit)),
        1 => pick().prop_map(Op::ClearDecomposeFailures),
        1 => pick().prop_map(Op::RecordLlmCall),
    ]
}

/// A seed of 3 to 9 created tasks, then up to `max_len` random operations.
pub(super) fn ops_strategy(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![3 => task_op(), 2 => supervisor_op(), 2 => super::checks::check_op()];
    (
        proptest::collection::vec(create(), 3..10),
        proptest::collection::vec(op, 1..max_len),
    )
        .prop_map(|(mut seed, ops)| {
            seed.extend(ops);
            seed
        })
}
