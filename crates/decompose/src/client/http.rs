//! [`HttpModel`], the real [`ModelClient`] on reqwest: one request, its reply read
//! within the size cap, and every error's text scrubbed of the key and the URL's
//! credentials.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use super::{CallFailure, FailureKind, ModelClient, ModelReply, MAX_RESPONSE_BYTES};
use crate::endpoint::{check_base_url, redact_url, url_secrets};
use crate::settings::{mask_secret, ApiKey, DecomposerSettings};

/// Provider error messages are cut to this many characters.
const PROVIDER_MESSAGE_MAX_CHARS: usize = 120;

/// Why an [`HttpModel`] could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the model's HTTP client: {0}")]
pub struct ClientError(String);

/// The real [`ModelClient`]: `POST {base_url}/chat/completions` over reqwest, plain
/// HTTP for local servers, HTTPS (rustls) for hosted providers. Its `Debug` shows the
/// URL redacted.
#[derive(Clone)]
pub struct HttpModel {
    http: reqwest::Client,
    url: reqwest::Url,
    key: Option<ApiKey>,
    secrets: Secrets,
    timeout: Duration,
}

impl std::fmt::Debug for HttpModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpModel")
            .field("url", &self.secrets.redacted_url)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpModel {
    /// A client for the endpoint, key and timeout of `settings`; refuses a base URL that
    /// is not HTTP(S), and plain HTTP to another machine unless the settings allow it.
    pub fn new(settings: &DecomposerSettings) -> Result<HttpModel, ClientError> {
        check_base_url(&settings.base_url, settings.allow_insecure_http)
            .map_err(|e| ClientError(e.to_string()))?;
        let mut url = reqwest::Url::parse(&settings.base_url)
            .map_err(|_| ClientError(format!("bad base URL {}", redact_url(&settings.base_url))))?;
        let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
        url.set_path(&path);
        let key = settings.resolved_api_key();
        let secrets = Secrets::new(&settings.base_url, url.as_str(), key.clone());
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError(secrets.error_text(e)))?;
        Ok(HttpModel {
            http,
            url,
            key,
            secrets,
            timeout: settings.timeout,
        })
    }

    /// The URL requests are posted to, its credentials redacted.
    pub fn url(&self) -> &str {
        &self.secrets.redacted_url
    }

    async fn exchange(&self, body: &Value) -> Result<ModelReply, CallFailure> {
        let mut request = self.http.post(self.url.clone()).json(body);
        if let Some(key) = &self.key {
            // bearer_auth marks the header sensitive, so reqwest never prints it either.
            request = request.bearer_auth(key.expose());
        }
        let mut response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let bytes = self.read_capped(&mut response, status).await?;
        if !(200..300).contains(&status) {
            let redirect = if (300..400).contains(&status) {
                " (a redirect; not followed)"
            } else {
                ""
            };
            let mut failure = CallFailure::new(
                FailureKind::HttpError,
                Some(status),
                match provider_message(&bytes, |text| self.secrets.scrub(text)) {
                    Some(message) => format!("model answered HTTP {status}{redirect}: {message}"),
                    None => format!("model answered HTTP {status}{redirect}"),
                },
            );
            failure.retry_after = retry_after;
            return Err(failure);
        }
        parse_reply_body(&bytes, status)
    }

    /// Reads the body in chunks, giving up as soon as it passes [`MAX_RESPONSE_BYTES`],
    /// so a runaway server costs at most that much memory.
    async fn read_capped(
        &self,
        response: &mut reqwest::Response,
        status: u16,
    ) -> Result<Vec<u8>, CallFailure> {
        let too_large = || {
            CallFailure::new(
                FailureKind::TooLarge,
                Some(status),
                "response too large (over 1 MiB)",
            )
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    fn transport(&self, e: reqwest::Error) -> CallFailure {
        let kind = if e.is_timeout() {
            FailureKind::Timeout
        } else {
            FailureKind::ConnectionError
        };
        let status = e.status().map(|s| s.as_u16());
        CallFailure::new(
            kind,
            status,
            format!(
                "cannot reach the model at {}: {}",
                self.secrets.redacted_url,
                self.secrets.error_text(e)
            ),
        )
    }
}

/// What must never appear in a message: the key (and any long piece of it), and the
/// credentials of the URL (the URL itself is shown redacted).
#[derive(Clone)]
struct Secrets {
    urls: Vec<String>,
    redacted_url: String,
    url_parts: Vec<String>,
    key: Option<ApiKey>,
}

/// A URL credential shorter than this is too common a string to mask in free text.
const MIN_URL_SECRET: usize = 4;

impl Secrets {
    fn new(base_url: &str, url: &str, key: Option<ApiKey>) -> Secrets {
        let mut url_parts = url_secrets(base_url);
        url_parts.retain(|s| s.chars().count() >= MIN_URL_SECRET);
        Secrets {
            urls: vec![url.to_owned(), base_url.to_owned()],
            redacted_url: redact_url(url),
            url_parts,
            key,
        }
    }

    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for url in &self.urls {
            text = text.replace(url, &redact_url(url));
        }
        for part in &self.url_parts {
            text = mask_secret(&text, part);
        }
        match &self.key {
            Some(key) => key.scrub(&text),
            None => text,
        }
    }

    /// An error and its causes on one line, without the URL (the caller names it
    /// redacted), scrubbed.
    fn error_text(&self, e: reqwest::Error) -> String {
        self.scrub(&error_chain(e))
    }
}

impl ModelClient for HttpModel {
    async fn send(&self, body: &Value) -> Result<ModelReply, CallFailure> {
        match tokio::time::timeout(self.timeout, self.exchange(body)).await {
            Ok(result) => result,
            Err(_) => Err(CallFailure::new(
                FailureKind::Timeout,
                None,
                format!("model call timed out after {}", show_duration(self.timeout)),
            )),
        }
    }
}

/// Reads a 2xx body as a chat completion.
fn parse_reply_body(bytes: &[u8], status: u16) -> Result<ModelReply, CallFailure> {
    let bad = |why: &str| {
        CallFailure::new(
            FailureKind::BadResponse,
            Some(status),
            format!("bad response from the model: {why}"),
        )
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|_| bad("not JSON"))?;
    let content = value
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no choices[0].message.content"))?;
    let tokens = |name: &str| {
        value
            .get("usage")
            .and_then(|usage| usage.get(name))
            .and_then(Value::as_i64)
    };
    Ok(ModelReply {
        content: content.to_owned(),
        http_status: status,
        prompt_tokens: tokens("prompt_tokens"),
        completion_tokens: tokens("completion_tokens"),
    })
}

/// `error.message` of an OpenAI-shaped error body, scrubbed, on one short line. It is
/// scrubbed before it is cut, so that a secret the cut would split is still found whole;
/// the margin bounds the work on a huge message.
fn provider_message(bytes: &[u8], scrub: impl Fn(&str) -> String) -> Option<String> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    let message = value.pointer("/error/message").and_then(Value::as_str)?;
    let head: String = message.chars().take(PROVIDER_MESSAGE_MAX_CHARS + 512).collect();
    let flat: String = scrub(&head)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(PROVIDER_MESSAGE_MAX_CHARS)
        .collect();
    let flat = flat.trim().to_owned();
    (!flat.is_empty()).then_some(flat)
}

/// `Retry-After` in seconds; the HTTP-date form is ignored (the backoff applies).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?;
    text.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// An error and its causes on one line, at most 200 characters, without the URL.
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = String::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = source {
        let part = err.to_string();
        if !part.is_empty() && !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        source = err.source();
    }
    text.chars().take(200).collect()
}

fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
