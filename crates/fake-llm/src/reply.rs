//! What the fake model answers: the [`Reply`] a script or a responder picks for one
//! chat-completion request, independent of how it is put on the wire.

use std::time::Duration;

use bytes::Bytes;

/// One scripted answer to a `POST /v1/chat/completions` request.
///
/// Every variant works for streaming (`"stream": true`) and non-streaming requests;
/// the variant docs say what differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A successful completion whose `choices[0].message.content` is `content`.
    ///
    /// Streamed as SSE chunks of [`Settings::chunk_chars`](crate::Settings::chunk_chars)
    /// characters when the request asks for a stream.
    Text {
        /// The assistant message.
        content: String,
        /// Token counts to report; `None` estimates them (one token per 4 characters).
        usage: Option<Usage>,
    },
    /// An HTTP error with an OpenAI-shaped body `{"error":{"message","type","code"}}`.
    Error {
        /// The HTTP status, e.g. 429 or 500. An invalid status is answered with 500.
        status: u16,
        /// Goes to `error.message`.
        message: String,
        /// Seconds for a `Retry-After` header, when set.
        retry_after: Option<u64>,
    },
    /// Arbitrary bytes with any status and content type, sent as they are, so a test can
    /// serve invalid UTF-8, non-JSON or an oversized body.
    Raw {
        /// The HTTP status. An invalid status is answered with 500.
        status: u16,
        /// The `Content-Type` header.
        content_type: String,
        /// The exact body.
        body: Bytes,
    },
    /// Never answers; the connection stays open until the server shuts down. Other
    /// requests are served meanwhile.
    Hang,
    /// Waits, then answers with `then`.
    Delay {
        /// How long to wait before answering.
        delay: Duration,
        /// The answer after the wait.
        then: Box<Reply>,
    },
    /// Sends the status, headers and the first `after_chunks` SSE chunks of `content`,
    /// then sends nothing more but keeps the connection open until shutdown. A
    /// non-streaming request gets the first half of its JSON body instead (with a
    /// `Content-Length` for the whole).
    Stall {
        /// The content the stream would have carried.
        content: String,
        /// How many content chunks go out before the stall.
        after_chunks: usize,
    },
    /// Sends the status, headers and the first `after_chunks` SSE chunks of `content`,
    /// then closes the connection abruptly (no terminating chunk, no `[DONE]`). A
    /// non-streaming request gets the first half of its JSON body instead.
    Drop {
        /// The content the stream would have carried.
        content: String,
        /// How many content chunks go out before the connection is closed.
        after_chunks: usize,
    },
}

impl Reply {
    /// A successful completion with estimated usage.
    pub fn text(content: impl Into<String>) -> Reply {
        Reply::Text {
            content: content.into(),
            usage: None,
        }
    }

    /// An HTTP error without `Retry-After`.
    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Raw bytes with status 200 and the given content type.
    pub fn raw(content_type: impl Into<String>, body: impl Into<Bytes>) -> Reply {
        Reply::Raw {
            status: 200,
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    /// `then`, after waiting `delay`.
    pub fn delayed(delay: Duration, then: Reply) -> Reply {
        Reply::Delay {
            delay,
            then: Box::new(then),
        }
    }
}

/// Token counts reported in a completion's `usage` object; `total_tokens` is their sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// `usage.completion_tokens`.
    pub completion_tokens: u64,
}
