//! One decomposition from start to commit (docs/decomposer.md): the guards checked before
//! anything is spent, the model call, the parse, the commit through the store, and the
//! failure policy of automatic calls. [`decompose`] and [`specify`] are the two ways in;
//! both end in an [`DecomposeOutcome`], never in a panic or an `Err`.

use std::sync::Arc;
use std::time::Instant;

use board_core::plan::automatic_guard;
use board_core::spend::window_start;
use board_core::{
    BreakerSignal, LlmLedger, Mode, Plan, PlanBasis, Refusal, Status, StoreError, TaskFacts, TaskId,
    Timestamp, TriageQueue,
};
use serde::Serialize;

use crate::client::{
    attempt_id, breaker_settings, call_deadline, call_model, jitter, signal_breaker, Attempt, Clock,
    ModelClient,
};
use crate::prompt::{build_request, build_specify_request};
use crate::reply::{parse_reply, template_reply};
use crate::settings::DecomposerSettings;
use board_core::LlmPurpose;

/// What became of one decomposition; `kanban decompose --json` prints it as one line.
///
/// ```
/// use board_core::TaskId;
/// use decompose::DecomposeOutcome;
///
/// let outcome = DecomposeOutcome::refused(TaskId::from_random([1, 2, 3, 4]), "no model".into());
/// assert_eq!(
///     serde_json::to_string(&outcome).unwrap(),
///     r#"{"task_id":"t_01020304","ok":false,"reason":"no model","fanout":false,"child_ids":[],"new_title":null}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecomposeOutcome {
    /// The card.
    pub task_id: TaskId,
    /// Whether a plan was committed.
    pub ok: bool,
    /// Why not, when `ok` is false: one line, never the model's prose or the API key.
    pub reason: Option<String>,
    /// Whether the committed plan was a fan-out.
    pub fanout: bool,
    /// The children created, in reply order (empty unless a fan-out was committed).
    pub child_ids: Vec<TaskId>,
    /// The card's title after a single-task rewrite.
    pub new_title: Option<String>,
    /// A failure charged to the card that the store could not record (a full disk):
    /// the gateway keeps it in memory instead. Not part of the JSON.
    #[serde(skip)]
    pub unrecorded_failure: bool,
}

impl DecomposeOutcome {
    /// Why nothing was committed, in one line that names the card once: the reason as it
    /// is when it already names the card (a store refusal does), else after `ID: `.
    /// `None` when a plan was committed.
    ///
    /// ```
    /// use board_core::TaskId;
    /// use decompose::DecomposeOutcome;
    ///
    /// let id = TaskId::from_random([1, 2, 3, 4]);
    /// let gone = DecomposeOutcome::refused(id.clone(), format!("no such task: {id}"));
    /// assert_eq!(gone.refusal().unwrap(), "no such task: t_01020304");
    /// let no_model = DecomposeOutcome::refused(id, "no model".into());
    /// assert_eq!(no_model.refusal().unwrap(), "t_01020304: no model");
    /// ```
    pub fn refusal(&self) -> Option<String> {
        if self.ok {
            return None;
        }
        let reason = self.reason.as_deref().unwrap_or("failed");
        Some(if reason.contains(self.task_id.as_str()) {
            reason.to_owned()
        } else {
            format!("{}: {reason}", self.task_id)
        })
    }

    /// A decomposition that committed nothing, for `reason`.
    pub fn refused(task_id: TaskId, reason: String) -> DecomposeOutcome {
        DecomposeOutcome {
            task_id,
            ok: false,
            reason: Some(reason),
            fanout: false,
            child_ids: Vec::new(),
            new_title: None,
            unrecorded_failure: false,
        }
    }
}

/// The decomposition lease an automatic call is made under: its holder (`host/pid`)
/// and when it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardLease {
    pub holder: String,
    pub expires: Timestamp,
}

/// How a decomposition is asked for: by the gateway or a person, as the provider
/// breaker's one probe, and whether a person sends it past a spend ceiling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    pub mode: Mode,
    /// The one request of a breaker expiry (automatic): sent while the breaker is open,
    /// never retried.
    pub probe: bool,
    /// `kanban decompose --over-budget`: go past a reached spend ceiling.
    pub over_budget: bool,
    /// The card's decomposition lease (automatic calls): the call's requests end before
    /// it expires, less the commit's margin (`client::call_deadline`), and the commit is
    /// refused unless it still holds.
    pub lease: Option<CardLease>,
}

impl From<Mode> for Ask {
    fn from(mode: Mode) -> Ask {
        Ask {
            mode,
            probe: false,
            over_budget: false,
            lease: None,
        }
    }
}

/// Decomposes one triage card: asks the model to split it or tighten it, and commits
/// the answer (docs/decomposer.md).
///
/// An automatic call (the gateway's) refuses, before any request, a card with execution
/// history, a parked card and one whose retry is not yet due; each of its failures is
/// recorded against the card's failure policy (backoff, then parking). A manual call
/// (a person's) first clears the card's failure count and park, and may decompose a
/// card with history. Both re-check the card at commit: a card that left triage, gained
/// a run (automatic) or was edited meanwhile keeps its state and the reply is dropped.
///
/// `clock` gives Unix seconds; it is read when the call starts and again at commit.
pub async fn decompose<C: ModelClient>(
    store: Arc<dyn TriageQueue>,
    client: &C,
    id: &TaskId,
    ask: impl Into<Ask>,
    settings: &DecomposerSettings,
    clock: &Clock,
) -> DecomposeOutcome {
    run(
        store,
        client,
        id,
        ask.into(),
        LlmPurpose::Decompose,
        settings,
        clock,
    )
    .await
}

/// Rewrites one triage card as a single, clearer task (`kanban specify`): the same path
/// as [`decompose`], but the model is told a fan-out is not allowed and a fan-out reply
/// is refused.
pub async fn specify<C: ModelClient>(
    store: Arc<dyn TriageQueue>,
    client: &C,
    id: &TaskId,
    ask: impl Into<Ask>,
    settings: &DecomposerSettings,
    clock: &Clock,
) -> DecomposeOutcome {
    run(
        store,
        client,
        id,
        ask.into(),
        LlmPurpose::Specify,
        settings,
        clock,
    )
    .await
}

/// Why an attempt ended without a commit, and whether it counts against the card.
struct Failed {
    reason: String,
    /// `false` when the card moved on (left triage, gained history, vanished) rather
    /// than failed, or when nothing was attempted.
    counts: bool,
    /// A provider fault: it counts only if the breaker says the provider is up for
    /// the other cards.
    provider: bool,
}

impl Failed {
    fn counted(reason: impl Into<String>) -> Failed {
        Failed {
            reason: reason.into(),
            counts: true,
            provider: false,
        }
    }

    fn uncounted(reason: impl Into<String>) -> Failed {
        Failed {
            reason: reason.into(),
            counts: false,
            provider: false,
        }
    }
}

async fn run<C: ModelClient>(
    store: Arc<dyn TriageQueue>,
    client: &C,
    id: &TaskId,
    ask: Ask,
    purpose: LlmPurpose,
    settings: &DecomposerSettings,
    clock: &Clock,
) -> DecomposeOutcome {
    let mode = ask.mode;
    let started = Instant::now();
    let result = attempt(&store, client, id, &ask, purpose, settings, clock).await;
    let duration_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok(outcome) => {
            tracing::info!(
                card = %id,
                purpose = purpose.as_str(),
                mode = mode_name(mode),
                outcome = "ok",
                fanout = outcome.fanout,
                children = outcome.child_ids.len(),
                duration_ms,
                "decomposition committed"
            );
            outcome
        }
        Err(failed) => {
            tracing::info!(
                card = %id,
                purpose = purpose.as_str(),
                mode = mode_name(mode),
                outcome = "failed",
                children = 0,
                duration_ms,
                reason = %failed.reason,
                "decomposition failed"
            );
            let counts = failed.counts && (!failed.provider || charged(&store, &ask).await);
            let unrecorded_failure = counts
                && mode == Mode::Automatic
                && !record_failure(&store, id, &failed.reason, settings, clock).await;
            DecomposeOutcome {
                unrecorded_failure,
                ..DecomposeOutcome::refused(id.clone(), failed.reason)
            }
        }
    }
}

/// The request body of a call: the prompt of `purpose` for `task`, with the configured
/// extra fields and reasoning effort.
fn request_body(
    purpose: LlmPurpose,
    task: &board_core::Task,
    settings: &DecomposerSettings,
) -> serde_json::Value {
    let (roster, model, max_tokens) = (&settings.roster, &settings.model, settings.max_tokens);
    let mut body = match purpose {
        LlmPurpose::Decompose => build_request(task, roster, model, max_tokens),
        LlmPurpose::Specify => build_specify_request(task, roster, model, max_tokens),
    };
    if purpose == LlmPurpose::Decompose && !settings.templates.is_empty() {
        if let Some(system) = body["messages"][0]["content"].as_str() {
            let with = format!(
                "{system}{}",
                crate::prompt::templates_paragraph(&settings.templates)
            );
            body["messages"][0]["content"] = serde_json::Value::from(with);
        }
    }
    crate::prompt::extend(
        &mut body,
        &settings.extra_body,
        settings.reasoning_effort.as_deref(),
    );
    body
}

async fn attempt<C: ModelClient>(
    store: &Arc<dyn TriageQueue>,
    client: &C,
    id: &TaskId,
    ask: &Ask,
    purpose: LlmPurpose,
    settings: &DecomposerSettings,
    clock: &Clock,
) -> Result<DecomposeOutcome, Failed> {
    let mode = ask.mode;
    let facts = read_facts(store, id).await?;
    let facts = match mode {
        Mode::Automatic => {
            automatic_guard(&facts, clock()).map_err(|r| Failed::uncounted(r.to_string()))?;
            facts
        }
        Mode::Manual => {
            // Checked before clearing, so a refused manual call writes nothing either.
            manual_guard(&facts).map_err(|r| Failed::uncounted(r.to_string()))?;
            let (cleared, id) = (Arc::clone(store), id.clone());
            let now = clock();
            blocking(move || cleared.clear_decompose_failures(&id, now))
                .await
                .map_err(|e| Failed::uncounted(e.to_string()))?;
            read_facts(store, &facts.task.id).await?
        }
    };
    let basis = PlanBasis::of(&facts).under_lease(ask.lease.as_ref().map(|l| l.holder.clone()));
    let body = request_body(purpose, &facts.task, settings);
    let over_budget = spend_guard(store, ask, settings, clock()).await?;
    if mode == Mode::Automatic {
        breaker_guard(store, id, ask, settings, clock()).await?;
    }
    let attempt = Attempt {
        card: id.clone(),
        id: attempt_id(),
        automatic: mode == Mode::Automatic,
        probe: ask.probe,
        over_budget,
        deadline: ask.lease.as_ref().map(|l| call_deadline(l.expires)),
    };
    let ledger: Arc<dyn LlmLedger> = store.clone();
    let completion = call_model(client, &ledger, &attempt, purpose, &body, settings, clock)
        .await
        .map_err(|failure| match failure.was_sent() {
            true => Failed {
                provider: failure.is_provider_fault(),
                ..Failed::counted(failure.message)
            },
            false => Failed::uncounted(failure.message),
        })?;
    let (plan, root_profile) = read_reply(&completion.content, purpose, &facts.task.title, settings)?;
    let (committer, card, mut plan_settings) = (Arc::clone(store), id.clone(), settings.plan.clone());
    if let Some(profile) = root_profile {
        plan_settings.orchestrator = profile;
    }
    let now = clock();
    let committed = blocking(move || committer.commit_plan(&card, &basis, mode, &plan, &plan_settings, now))
        .await
        .map_err(commit_failure)?;
    let fanout = !committed.child_ids.is_empty();
    Ok(DecomposeOutcome {
        task_id: id.clone(),
        ok: true,
        reason: None,
        fanout,
        new_title: (!fanout).then(|| committed.root.title.clone()),
        child_ids: committed.child_ids,
        unrecorded_failure: false,
    })
}

/// The plan a reply gives (and the profile that does the card last, when the reply picked
/// one of the team's templates), or why it is refused.
fn read_reply(
    content: &str,
    purpose: LlmPurpose,
    goal: &str,
    settings: &DecomposerSettings,
) -> Result<(Plan, Option<String>), Failed> {
    let (plan, root_profile) = match template_reply(content, &settings.templates, goal, settings) {
        Some(chosen) => chosen.map_err(|r| Failed::counted(r.to_string()))?,
        None => (
            parse_reply(content, &settings.roster).map_err(|r| Failed::counted(r.to_string()))?,
            None,
        ),
    };
    if let (LlmPurpose::Specify, Plan::Fanout { tasks, .. }) = (purpose, &plan) {
        return Err(Failed::counted(format!(
            "specify needs a single task, but the reply splits the card into {} tasks",
            tasks.len()
        )));
    }
    Ok((plan, root_profile))
}

/// Refuses a call at a reached spend ceiling, unless a person passed `--over-budget`;
/// says whether the call goes past one (its ledger rows then say so).
async fn spend_guard(
    store: &Arc<dyn TriageQueue>,
    ask: &Ask,
    settings: &DecomposerSettings,
    now: i64,
) -> Result<bool, Failed> {
    if settings.ceilings == Default::default() {
        return Ok(false);
    }
    let reader = Arc::clone(store);
    let spend = blocking(move || reader.spend(window_start(now)))
        .await
        .map_err(|e| Failed::uncounted(e.to_string()))?;
    let Some(reached) = settings.ceilings.reached(&spend) else {
        return Ok(false);
    };
    match ask {
        Ask {
            mode: Mode::Manual,
            over_budget: true,
            ..
        } => Ok(true),
        Ask { mode: Mode::Manual, .. } => Err(Failed::uncounted(format!(
            "the spend ceiling is reached: {reached}; nothing was sent. Pass --over-budget to send it anyway (the ledger records it)"
        ))),
        Ask { .. } => Err(Failed::uncounted(format!("the spend ceiling is reached: {reached}"))),
    }
}

/// An automatic call while the provider breaker is open is refused unless it is the
/// probe, which first moves the breaker's next probe time on (so a restart cannot send
/// a second one).
async fn breaker_guard(
    store: &Arc<dyn TriageQueue>,
    id: &TaskId,
    ask: &Ask,
    settings: &DecomposerSettings,
    now: i64,
) -> Result<(), Failed> {
    if ask.probe {
        let taken = BreakerSignal::ProbeTaken { card: id.clone() };
        let ledger: Arc<dyn LlmLedger> = store.clone();
        signal_breaker(&ledger, taken, breaker_settings(settings), now).await;
        return Ok(());
    }
    let reader = Arc::clone(store);
    let breaker = blocking(move || reader.breaker())
        .await
        .map_err(|e| Failed::uncounted(e.to_string()))?;
    if breaker.open {
        return Err(Failed::uncounted(
            "the provider breaker is open: automatic decomposition is paused",
        ));
    }
    Ok(())
}

/// Whether a provider fault of this call is charged to its card: an automatic call,
/// not the probe, and the breaker stayed closed with the provider seen up.
async fn charged(store: &Arc<dyn TriageQueue>, ask: &Ask) -> bool {
    if ask.mode != Mode::Automatic || ask.probe {
        return false;
    }
    let reader = Arc::clone(store);
    blocking(move || reader.breaker())
        .await
        .is_ok_and(|b| b.charges())
}

/// A manual call needs what the commit needs: a triage card not yet decomposed.
fn manual_guard(facts: &TaskFacts) -> Result<(), Refusal> {
    let task = &facts.task;
    if task.status != Status::Triage {
        return Err(Refusal::WrongStatus {
            id: task.id.clone(),
            status: task.status,
            op: "decomposition",
            allowed: "triage",
        });
    }
    if facts.decomposed {
        return Err(Refusal::AlreadyDecomposed(task.id.clone()));
    }
    Ok(())
}

/// A refusal at commit counts as a failure unless the card moved on: it left triage,
/// gained a run, was decomposed by someone else or is gone; or its lease lapsed (the
/// gateway that took the lease over charged that attempt already). An edit (`input changed`)
/// and a storage error count (docs/decomposer.md#failure-policy: a DB refusal is a failed attempt).
fn commit_failure(e: StoreError) -> Failed {
    let moved = matches!(
        e.refusal(),
        Some(
            Refusal::GainedHistory(_)
                | Refusal::LeaseLapsed(_)
                | Refusal::ExecutionHistory(_)
                | Refusal::WrongStatus { .. }
                | Refusal::AlreadyDecomposed(_)
                | Refusal::NoSuchTask(_)
        )
    );
    if moved {
        Failed::uncounted(e.to_string())
    } else {
        Failed::counted(e.to_string())
    }
}

async fn read_facts(store: &Arc<dyn TriageQueue>, id: &TaskId) -> Result<TaskFacts, Failed> {
    let (store, id) = (Arc::clone(store), id.clone());
    blocking(move || store.facts(&id))
        .await
        .map_err(|e| Failed::uncounted(e.to_string()))
}

/// Records a failed automatic attempt: backoff with jitter, parking at the limit.
/// Whether the store holds it.
async fn record_failure(
    store: &Arc<dyn TriageQueue>,
    id: &TaskId,
    reason: &str,
    settings: &DecomposerSettings,
    clock: &Clock,
) -> bool {
    let (recorder, card, error) = (Arc::clone(store), id.clone(), reason.to_owned());
    let (policy, jitter, now) = (settings.retry_policy, jitter(), clock());
    let recorded =
        blocking(move || recorder.record_decompose_failure(&card, &error, policy, jitter, now)).await;
    match recorded {
        Ok(task) if task.decompose_parked => tracing::warn!(
            card = %id,
            failures = task.decompose_failures,
            reason,
            "card parked after repeated decomposition failures; it stays in triage for a human"
        ),
        Ok(task) => {
            tracing::debug!(card = %id, failures = task.decompose_failures, next_attempt_at = task.decompose_next_attempt_at, "decomposition failure recorded")
        }
        // The card left triage meanwhile (it is no longer failing), or the disk is full.
        Err(e) => {
            tracing::debug!(card = %id, error = %e, "decomposition failure not recorded");
            return false;
        }
    }
    true
}

/// Runs a synchronous store call off the async threads. A panicked store call is a
/// storage error, not a panic of the decomposition.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(call).await {
        Ok(result) => result,
        Err(e) => Err(StoreError::Backend(format!("store call did not finish: {e}"))),
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Manual => "manual",
        Mode::Automatic => "automatic",
    }
}
