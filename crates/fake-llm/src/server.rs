//! The HTTP side: the accept loop, routing, the API key check, and putting a chosen
//! [`Reply`] on the wire (JSON, SSE, partial bodies, hangs), until shutdown.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::channel::Channel;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::reply::{Reply, Usage};
use crate::request_log::{
    find_task_id, message_texts, RecordedBody, RecordedRequest, RequestKind, RequestLog,
};
use crate::script::{Choice, ScriptState};
use crate::wire::{self, Completion};
use crate::Settings;

/// Request bodies above this get 413; generous, since tests send big prompts on purpose.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// After a failed `accept` (e.g. out of file descriptors), wait instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// A callback run after a request is recorded and before it is answered.
pub(crate) type RequestHook = Arc<dyn Fn(&RecordedRequest) + Send + Sync>;

pub(crate) type ReplyBody = Either<Full<Bytes>, Channel<Bytes, MidStreamDrop>>;

/// The error a dropping reply feeds hyper so that it closes the connection abruptly.
#[derive(Debug, thiserror::Error)]
#[error("fake-llm closed the connection mid-stream, as scripted")]
pub(crate) struct MidStreamDrop;

/// Everything the connections share.
pub(crate) struct Shared {
    api_key: Option<String>,
    chunk_chars: usize,
    chunk_delay: Duration,
    script: Mutex<ScriptState>,
    hook: Mutex<Option<RequestHook>>,
    pub(crate) log: RequestLog,
    completions: AtomicU64,
}

impl Shared {
    pub(crate) fn script(&self) -> std::sync::MutexGuard<'_, ScriptState> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_hook(&self, hook: RequestHook) {
        *self.hook.lock().unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }

    fn hook(&self) -> Option<RequestHook> {
        self.hook.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Binds 127.0.0.1 (never a public interface) and builds the shared state.
pub(crate) async fn bind(settings: Settings) -> std::io::Result<(TcpListener, Arc<Shared>)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, settings.port)).await?;
    let shared = Shared {
        api_key: settings.api_key,
        chunk_chars: settings.chunk_chars.max(1),
        chunk_delay: settings.chunk_delay,
        script: Mutex::new(ScriptState::new(settings.script)),
        hook: Mutex::new(None),
        log: RequestLog::new(),
        completions: AtomicU64::new(0),
    };
    Ok((listener, Arc::new(shared)))
}

/// Resolves once the owner's shutdown sender is dropped.
pub(crate) async fn until_shutdown(shutdown: &mut watch::Receiver<()>) {
    while shutdown.changed().await.is_ok() {}
}

/// Accepts connections until shutdown; each connection (and anything it started) ends
/// at shutdown too, which is what releases hanging and stalled requests.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<()>) {
    loop {
        let stream = tokio::select! {
            () = until_shutdown(&mut shutdown) => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let shared = Arc::clone(&shared);
        let mut connection_shutdown = shutdown.clone();
        let request_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = Arc::clone(&shared);
                let shutdown = request_shutdown.clone();
                async move { Ok::<_, Infallible>(handle(&shared, shutdown, request).await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = until_shutdown(&mut connection_shutdown) => {}
            }
        });
    }
}

async fn handle(
    shared: &Shared,
    shutdown: watch::Receiver<()>,
    request: Request<Incoming>,
) -> Response<ReplyBody> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let headers = header_map(request.headers());
    let body = Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await;

    if path.starts_with("/_fake/") {
        return control(shared, &method, &path);
    }

    let (bytes, body_problem) = read_body(body);
    let body = RecordedBody::from_bytes(&bytes);
    let task_id = match &body {
        RecordedBody::Json(value) => find_task_id(value),
        RecordedBody::Text(_) => None,
    };
    let recorded = shared.log.record(RecordedRequest {
        seq: 0,
        method: method.to_string(),
        path: path.clone(),
        headers,
        kind: RequestKind::of_body(&body),
        body,
        received_at_ms: unix_millis(),
        task_id,
    });

    if let Some(hook) = shared.hook() {
        let seen = recorded.clone();
        // Blocking pool: hooks do blocking work (a database write) and must not stall
        // the runtime that serves other requests. A panicking hook is the test's bug;
        // the request is still answered.
        let _ = tokio::task::spawn_blocking(move || hook(&seen)).await;
    }

    if let Some((status, message)) = body_problem {
        return error_response(status, &message, None);
    }
    if let Some(key) = &shared.api_key {
        let expected = format!("Bearer {key}");
        if recorded.header("authorization") != Some(expected.as_str()) {
            return error_response(
                StatusCode::UNAUTHORIZED,
                "Incorrect API key provided. Send Authorization: Bearer <key>.",
                None,
            );
        }
    }

    match (&method, path.as_str()) {
        (&Method::POST, "/v1/chat/completions") => chat(shared, shutdown, &recorded).await,
        (&Method::GET, "/v1/models") => json_response(StatusCode::OK, &wire::models_list()),
        (_, "/v1/chat/completions" | "/v1/models") => error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("method {method} is not allowed on {path}"),
            None,
        ),
        _ => not_found(&path),
    }
}

/// The request's body, or the error status and message that answer it when it is too
/// large or unreadable (the request is still recorded).
fn read_body(
    body: Result<http_body_util::Collected<Bytes>, Box<dyn std::error::Error + Send + Sync>>,
) -> (Bytes, Option<(StatusCode, String)>) {
    match body {
        Ok(collected) => (collected.to_bytes(), None),
        Err(err) if err.is::<LengthLimitError>() => (
            Bytes::new(),
            Some((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body is over {MAX_REQUEST_BYTES} bytes"),
            )),
        ),
        Err(err) => (
            Bytes::new(),
            Some((
                StatusCode::BAD_REQUEST,
                format!("cannot read request body: {err}"),
            )),
        ),
    }
}

/// The `/_fake/` endpoints, which are not recorded: reading the log must not change it.
fn control(shared: &Shared, method: &Method, path: &str) -> Response<ReplyBody> {
    match (method, path) {
        (&Method::GET, "/_fake/requests") => match serde_json::to_value(shared.log.snapshot()) {
            Ok(log) => json_response(StatusCode::OK, &log),
            Err(err) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot serialize the request log: {err}"),
                None,
            ),
        },
        _ => not_found(path),
    }
}

/// What every answer to one chat request needs besides the reply itself.
struct ChatRequest<'a> {
    completion: Completion,
    stream: bool,
    include_usage: bool,
    prompt_tokens: u64,
    shared: &'a Shared,
}

async fn chat(
    shared: &Shared,
    shutdown: watch::Receiver<()>,
    recorded: &RecordedRequest,
) -> Response<ReplyBody> {
    let Some(body) = recorded
        .json()
        .filter(|body| body.get("messages").is_some_and(Value::is_array))
    else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "request body must be a JSON object with a \"messages\" array",
            None,
        );
    };
    let request = ChatRequest {
        completion: Completion {
            id: format!(
                "chatcmpl-fake-{}",
                shared.completions.fetch_add(1, Ordering::Relaxed)
            ),
            created: unix_millis() / 1000,
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(wire::MODEL_ID)
                .to_owned(),
        },
        stream: body.get("stream") == Some(&Value::Bool(true)),
        include_usage: body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)),
        prompt_tokens: message_texts(body).into_iter().map(wire::estimate_tokens).sum(),
        shared,
    };

    // Taken under the lock, but a responder is user code: it runs after the lock is
    // released so it may be slow or script further replies.
    let choice = shared.script().choose(recorded.task_id.as_deref());
    let reply = match choice {
        Choice::Reply(reply) => reply,
        Choice::Responder(responder) => {
            match std::panic::catch_unwind(AssertUnwindSafe(|| responder(recorded))) {
                Ok(reply) => reply,
                Err(_) => {
                    return error_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "fake-llm: the responder function panicked",
                        None,
                    )
                }
            }
        }
    };
    answer(&request, reply, shutdown).await
}

async fn answer(
    request: &ChatRequest<'_>,
    reply: Reply,
    shutdown: watch::Receiver<()>,
) -> Response<ReplyBody> {
    match reply {
        Reply::Text { content, usage } => {
            let usage = usage.unwrap_or(Usage {
                prompt_tokens: request.prompt_tokens,
                completion_tokens: wire::estimate_tokens(&content),
            });
            if request.stream {
                let usage = request.include_usage.then_some(usage);
                let frames = sse_frames(request, &content, None, usage);
                sse_response(frames, Ending::Complete, shutdown)
            } else {
                json_response(StatusCode::OK, &request.completion.message(&content, usage))
            }
        }
        Reply::Error {
            status,
            message,
            retry_after,
        } => match StatusCode::from_u16(status) {
            Ok(status) => error_response(status, &message, retry_after),
            Err(_) => invalid_status(status),
        },
        Reply::Raw {
            status,
            content_type,
            body,
        } => raw_response(status, &content_type, body),
        Reply::Hang => {
            // Never answer, not even at shutdown: the connection task drops this
            // future with the connection, so the client sees the connection close.
            std::future::pending().await
        }
        Reply::Delay { delay, then } => {
            tokio::time::sleep(delay).await;
            Box::pin(answer(request, *then, shutdown)).await
        }
        Reply::Stall {
            content,
            after_chunks,
        } => cut_short(request, &content, after_chunks, Ending::Stall, shutdown),
        Reply::Drop {
            content,
            after_chunks,
        } => cut_short(request, &content, after_chunks, Ending::Drop, shutdown),
    }
}

/// How a body produced chunk by chunk ends.
#[derive(Clone, Copy)]
enum Ending {
    /// Normally.
    Complete,
    /// It stops sending but keeps the connection open until shutdown.
    Stall,
    /// The connection is closed abruptly.
    Drop,
}

/// A chunk to send after waiting `delay`.
struct Frame {
    delay: Duration,
    data: Bytes,
}

/// The SSE events of a streamed completion. `cut_after: None` sends every content
/// chunk, the finish chunk, the usage chunk when `usage` is given, and `[DONE]`;
/// `Some(n)` sends at most `n` content chunks and nothing after them.
fn sse_frames(
    request: &ChatRequest<'_>,
    content: &str,
    cut_after: Option<usize>,
    usage: Option<Usage>,
) -> Vec<Frame> {
    let pieces = wire::split_chars(content, request.shared.chunk_chars);
    let mut frames: Vec<Frame> = pieces
        .iter()
        .take(cut_after.unwrap_or(usize::MAX))
        .enumerate()
        .map(|(index, piece)| Frame {
            delay: request.shared.chunk_delay,
            data: wire::sse_event(&request.completion.content_chunk(piece, index == 0)),
        })
        .collect();
    if cut_after.is_none() {
        let mut tail = vec![wire::sse_event(&request.completion.finish_chunk())];
        if let Some(usage) = usage {
            tail.push(wire::sse_event(&request.completion.usage_chunk(usage)));
        }
        tail.push(Bytes::from_static(wire::DONE_EVENT));
        frames.extend(tail.into_iter().map(|data| Frame {
            delay: Duration::ZERO,
            data,
        }));
    }
    frames
}

/// A stall or drop: part of an SSE stream, or the first half of a JSON body announced
/// with its full `Content-Length` so the client knows it is incomplete.
fn cut_short(
    request: &ChatRequest<'_>,
    content: &str,
    after_chunks: usize,
    ending: Ending,
    shutdown: watch::Receiver<()>,
) -> Response<ReplyBody> {
    if request.stream {
        let frames = sse_frames(request, content, Some(after_chunks), None);
        return sse_response(frames, ending, shutdown);
    }
    let usage = Usage {
        prompt_tokens: request.prompt_tokens,
        completion_tokens: wire::estimate_tokens(content),
    };
    let whole = Bytes::from(request.completion.message(content, usage).to_string());
    let frames = vec![Frame {
        delay: Duration::ZERO,
        data: whole.slice(..whole.len() / 2),
    }];
    let mut response = Response::new(Either::Right(produce(frames, ending, shutdown)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(whole.len()));
    response
}

fn sse_response(frames: Vec<Frame>, ending: Ending, shutdown: watch::Receiver<()>) -> Response<ReplyBody> {
    let mut response = Response::new(Either::Right(produce(frames, ending, shutdown)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A body fed by a task that sends the frames, then ends as told.
fn produce(
    frames: Vec<Frame>,
    ending: Ending,
    mut shutdown: watch::Receiver<()>,
) -> Channel<Bytes, MidStreamDrop> {
    // Capacity 1 keeps the producer in step with what hyper has taken (see Drop).
    let (mut sender, body) = Channel::new(1);
    tokio::spawn(async move {
        for frame in frames {
            if !frame.delay.is_zero() {
                tokio::time::sleep(frame.delay).await;
            }
            if sender.send_data(frame.data).await.is_err() {
                return; // the client went away
            }
        }
        match ending {
            Ending::Complete => drop(sender),
            Ending::Stall => {
                until_shutdown(&mut shutdown).await;
                // Dropping the sender would end the body cleanly; a stall ends abruptly.
                sender.abort(MidStreamDrop);
            }
            Ending::Drop => {
                // hyper skips empty frames, and the channel holds one frame: once the
                // second empty frame is taken, hyper has written the last real chunk
                // and found the channel empty, which is when it flushes. Aborting
                // earlier would discard chunks still in its write buffer.
                for _ in 0..2 {
                    if sender.send_data(Bytes::new()).await.is_err() {
                        return;
                    }
                }
                sender.abort(MidStreamDrop);
            }
        }
    });
    body
}

fn full(body: impl Into<Bytes>) -> ReplyBody {
    Either::Left(Full::new(body.into()))
}

fn json_response(status: StatusCode, value: &Value) -> Response<ReplyBody> {
    let mut response = Response::new(full(value.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An OpenAI-shaped error, with `Retry-After` in seconds when given.
fn error_response(status: StatusCode, message: &str, retry_after: Option<u64>) -> Response<ReplyBody> {
    let mut response = json_response(status, &wire::error_body(status, message));
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from(seconds));
    }
    response
}

fn invalid_status(status: u16) -> Response<ReplyBody> {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("fake-llm: scripted status {status} is not a valid HTTP status"),
        None,
    )
}

fn raw_response(status: u16, content_type: &str, body: Bytes) -> Response<ReplyBody> {
    let Ok(code) = StatusCode::from_u16(status) else {
        return invalid_status(status);
    };
    let Ok(content_type) = HeaderValue::from_str(content_type) else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("fake-llm: scripted content type {content_type:?} is not a valid header"),
            None,
        );
    };
    let mut response = Response::new(full(body));
    *response.status_mut() = code;
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

fn not_found(path: &str) -> Response<ReplyBody> {
    error_response(
        StatusCode::NOT_FOUND,
        &format!("no route for {path}; fake-llm serves /v1/chat/completions, /v1/models and /_fake/requests"),
        None,
    )
}

fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        map.entry(name.as_str().to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    map
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
