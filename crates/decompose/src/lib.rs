//! The decomposer (docs/decomposer.md): it reads a triage card, asks an OpenAI-compatible model to
//! split it into a graph of tasks or tighten it into one, and commits the answer through
//! the board's `Store`.
//!
//! The pure half: who may be assigned work ([`Roster`]), the request that asks a model
//! to split a card ([`prompt`]), and the parser that turns the reply into a validated
//! [`board_core::Plan`] ([`reply`]). The I/O half: the model call behind
//! [`ModelClient`] with its retries and billing ([`client`]), and one decomposition from
//! the guards to the commit ([`decompose`], [`specify`]), configured by
//! [`DecomposerSettings`].

pub mod client;
mod decomposition;
pub mod endpoint;
pub mod prompt;
pub mod reply;
mod roster;
mod settings;

pub use client::{
    call_deadline, call_model, lease_seconds, Attempt, CallFailure, ClientError, Clock, FailureKind,
    HttpModel, ModelClient, ModelReply,
};
pub use decomposition::{decompose, specify, Ask, CardLease, DecomposeOutcome};
pub use prompt::{build_request, build_specify_request};
pub use reply::{parse_reply, Rejection};
pub use roster::{Profile, Roster, DEFAULT_ASSIGNEE};
pub use settings::{
    mask_secret, resolve_api_key, ApiKey, DecomposerSettings, DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL,
    DEFAULT_MAX_TOKENS, DEFAULT_MODEL, DEFAULT_TIMEOUT_SECONDS, DEFAULT_TRANSIENT_RETRIES,
    MIN_SECRET_FRAGMENT,
};
