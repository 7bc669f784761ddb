//! The decomposer's pure half (SPEC 5.1, 5.2): who may be assigned work ([`Roster`]),
//! the chat-completion request that asks a model to split a card ([`prompt`]), and the
//! parser that turns the model's reply into a validated [`board_core::Plan`] ([`reply`]).
//!
//! Nothing here does I/O: the HTTP client and the commit live above this crate and call
//! [`prompt::build_request`] and [`reply::parse_reply`].

pub mod prompt;
pub mod reply;
mod roster;

pub use prompt::build_request;
pub use reply::{parse_reply, Rejection};
pub use roster::{Profile, Roster, DEFAULT_ASSIGNEE};
