//! Which reply a request gets: the [`Script`] (default, ordered replies, per-task
//! replies), its JSON file format, and the precedence between a script and a
//! responder function.
//!
//! Precedence, first match wins:
//! 1. the per-task replies for the request's task id (`Task id: t_<hex>` in a message);
//!    they are consumed in order and the last one repeats once the others are used;
//! 2. the ordered replies, each used once;
//! 3. the responder function, when one is set;
//! 4. the default reply.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;

use crate::reply::{Reply, Usage};
use crate::request_log::RecordedRequest;

/// The text of the default reply when nothing else is scripted.
pub const UNSCRIPTED_TEXT: &str = "fake-llm: no reply scripted";

/// A function that picks the reply for a request (see the module docs for precedence).
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// The replies a server starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    /// Answered when no other rule gives a reply.
    pub default: Reply,
    /// Used once each, in order.
    pub replies: Vec<Reply>,
    /// Per task id (`t_<hex>`): used in order, the last one repeating.
    pub tasks: BTreeMap<String, Vec<Reply>>,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            default: Reply::text(UNSCRIPTED_TEXT),
            replies: Vec::new(),
            tasks: BTreeMap::new(),
        }
    }
}

/// Why a script file could not be used. The message is one line and names the file.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid script.
    #[error("bad script file {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, with line and column when JSON parsing found it.
        reason: String,
    },
}

impl Script {
    /// Reads a script file (format: see [`Script::from_json`]).
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: shown.clone(),
            source,
        })?;
        Script::from_json(&text).map_err(|reason| ScriptError::Invalid { path: shown, reason })
    }

    /// Parses a script from JSON; the error is a one-line reason.
    ///
    /// Every key is optional; unknown keys are errors, so typos do not pass silently:
    ///
    /// ```json
    /// {
    ///   "default": {"kind": "text", "content": "fallback"},
    ///   "replies": [
    ///     {"kind": "error", "status": 503, "message": "busy", "retry_after": 1},
    ///     {"kind": "text", "content_json": {"fanout": false, "title": "t"}}
    ///   ],
    ///   "tasks": {"t_0123abcd": [{"kind": "delay", "ms": 50, "then": {"kind": "hang"}}]}
    /// }
    /// ```
    ///
    /// Reply kinds: `text` (`content` string or `content_json` any JSON, optional `usage`
    /// `{prompt_tokens, completion_tokens}`), `error` (`status` 400-599, `message`,
    /// optional `retry_after` seconds), `raw` (`status` default 200, `content_type`
    /// default `application/json`, `body` string), `hang`, `delay` (`ms`, `then`),
    /// `stall` and `drop` (`content`, `after_chunks`).
    pub fn from_json(text: &str) -> Result<Script, String> {
        let file: ScriptFile = serde_json::from_str(text).map_err(|err| err.to_string())?;
        let mut script = Script::default();
        if let Some(default) = file.default {
            script.default = default.into_reply("default")?;
        }
        for (index, spec) in file.replies.into_iter().enumerate() {
            script
                .replies
                .push(spec.into_reply(&format!("replies[{index}]"))?);
        }
        for (task_id, specs) in file.tasks {
            if !is_task_id(&task_id) {
                return Err(format!(
                    "tasks: {task_id:?} is not a task id (t_ then lowercase hex digits)"
                ));
            }
            if specs.is_empty() {
                return Err(format!("tasks.{task_id}: needs at least one reply"));
            }
            let mut replies = Vec::with_capacity(specs.len());
            for (index, spec) in specs.into_iter().enumerate() {
                replies.push(spec.into_reply(&format!("tasks.{task_id}[{index}]"))?);
            }
            script.tasks.insert(task_id, replies);
        }
        Ok(script)
    }
}

fn is_task_id(text: &str) -> bool {
    text.strip_prefix("t_").is_some_and(|hex| {
        !hex.is_empty()
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    default: Option<ReplySpec>,
    #[serde(default)]
    replies: Vec<ReplySpec>,
    #[serde(default)]
    tasks: BTreeMap<String, Vec<ReplySpec>>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum ReplySpec {
    Text {
        content: Option<String>,
        content_json: Option<serde_json::Value>,
        usage: Option<Usage>,
    },
    Error {
        status: u16,
        message: String,
        retry_after: Option<u64>,
    },
    Raw {
        #[serde(default = "ok_status")]
        status: u16,
        #[serde(default = "json_content_type")]
        content_type: String,
        body: String,
    },
    Hang,
    Delay {
        ms: u64,
        then: Box<ReplySpec>,
    },
    Stall {
        content: String,
        after_chunks: usize,
    },
    Drop {
        content: String,
        after_chunks: usize,
    },
}

fn ok_status() -> u16 {
    200
}

fn json_content_type() -> String {
    "application/json".to_owned()
}

impl ReplySpec {
    /// Checks what serde cannot and builds the reply; `at` names the place for errors.
    fn into_reply(self, at: &str) -> Result<Reply, String> {
        Ok(match self {
            ReplySpec::Text {
                content,
                content_json,
                usage,
            } => {
                let content = match (content, content_json) {
                    (Some(text), None) => text,
                    (None, Some(json)) => json.to_string(),
                    _ => {
                        return Err(format!(
                            "{at}: a text reply needs exactly one of content and content_json"
                        ))
                    }
                };
                Reply::Text { content, usage }
            }
            ReplySpec::Error {
                status,
                message,
                retry_after,
            } => {
                if !(400..=599).contains(&status) {
                    return Err(format!("{at}: error status {status} is not 400-599"));
                }
                Reply::Error {
                    status,
                    message,
                    retry_after,
                }
            }
            ReplySpec::Raw {
                status,
                content_type,
                body,
            } => {
                if !(100..=599).contains(&status) {
                    return Err(format!("{at}: raw status {status} is not 100-599"));
                }
                if hyper::header::HeaderValue::from_str(&content_type).is_err() {
                    return Err(format!(
                        "{at}: content_type {content_type:?} is not a valid header value"
                    ));
                }
                Reply::Raw {
                    status,
                    content_type,
                    body: Bytes::from(body),
                }
            }
            ReplySpec::Hang => Reply::Hang,
            ReplySpec::Delay { ms, then } => Reply::Delay {
                delay: Duration::from_millis(ms),
                then: Box::new(then.into_reply(&format!("{at}.then"))?),
            },
            ReplySpec::Stall {
                content,
                after_chunks,
            } => Reply::Stall {
                content,
                after_chunks,
            },
            ReplySpec::Drop {
                content,
                after_chunks,
            } => Reply::Drop {
                content,
                after_chunks,
            },
        })
    }
}

/// What the selection found: a reply, or the responder to call (outside the lock, since
/// it is user code and may be slow or call back into the server).
pub(crate) enum Choice {
    Reply(Reply),
    Responder(Responder),
}

/// The live, consumable form of a [`Script`] plus the responder.
pub(crate) struct ScriptState {
    default: Reply,
    replies: VecDeque<Reply>,
    tasks: HashMap<String, VecDeque<Reply>>,
    responder: Option<Responder>,
}

impl ScriptState {
    pub(crate) fn new(script: Script) -> ScriptState {
        let mut state = ScriptState {
            default: script.default,
            replies: script.replies.into(),
            tasks: HashMap::new(),
            responder: None,
        };
        for (task_id, replies) in script.tasks {
            state.script_task(task_id, replies);
        }
        state
    }

    pub(crate) fn push_reply(&mut self, reply: Reply) {
        self.replies.push_back(reply);
    }

    pub(crate) fn set_default(&mut self, reply: Reply) {
        self.default = reply;
    }

    pub(crate) fn set_responder(&mut self, responder: Option<Responder>) {
        self.responder = responder;
    }

    /// Replaces a task's replies; an empty list removes the task's route.
    pub(crate) fn script_task(&mut self, task_id: String, replies: Vec<Reply>) {
        if replies.is_empty() {
            self.tasks.remove(&task_id);
        } else {
            self.tasks.insert(task_id, replies.into());
        }
    }

    /// Applies the precedence of the module docs, consuming what it uses.
    pub(crate) fn choose(&mut self, task_id: Option<&str>) -> Choice {
        if let Some(queue) = task_id.and_then(|id| self.tasks.get_mut(id)) {
            let reply = if queue.len() > 1 {
                queue.pop_front()
            } else {
                queue.front().cloned()
            };
            if let Some(reply) = reply {
                return Choice::Reply(reply);
            }
        }
        if let Some(reply) = self.replies.pop_front() {
            return Choice::Reply(reply);
        }
        if let Some(responder) = &self.responder {
            return Choice::Responder(Arc::clone(responder));
        }
        Choice::Reply(self.default.clone())
    }
}
