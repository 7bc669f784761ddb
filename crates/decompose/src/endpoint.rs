//! The model's base URL: which ones may carry the key (HTTPS, or plain HTTP to this
//! machine unless allowed), and the URL as it may be shown, with any credential it holds
//! (`user:pass@`, query values) replaced by `[redacted]`.

use reqwest::Url;

const REDACTED: &str = "[redacted]";

/// Why a base URL is refused. Its text never quotes the URL's credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Not an absolute `http://` or `https://` URL.
    #[error("expected an http:// or https:// URL, got {0:?}")]
    NotHttp(String),
    /// Plain HTTP to another machine: the key and the cards would cross the network in clear.
    #[error(
        "plain http:// to {0} sends the API key and the cards in clear; use https:// \
         (or set model.allow_insecure_http: true)"
    )]
    InsecureHttp(String),
}

/// Refuses a base URL that is not HTTP(S), and a plain-HTTP one to a host other than
/// this machine unless `allow_insecure_http`.
///
/// ```
/// use decompose::endpoint::check_base_url;
///
/// assert!(check_base_url("https://api.example.com/v1", false).is_ok());
/// assert!(check_base_url("http://127.0.0.1:11434/v1", false).is_ok());
/// assert!(check_base_url("http://api.example.com/v1", false).is_err());
/// assert!(check_base_url("http://api.example.com/v1", true).is_ok());
/// ```
pub fn check_base_url(base_url: &str, allow_insecure_http: bool) -> Result<(), EndpointError> {
    let url = Url::parse(base_url)
        .ok()
        .filter(|u| {
            matches!(u.scheme(), "http" | "https") && u.has_host() && !base_url.contains(char::is_whitespace)
        })
        .ok_or_else(|| EndpointError::NotHttp(cut_after_authority(base_url)))?;
    if url.scheme() == "http" && !allow_insecure_http && !is_loopback(&url) {
        return Err(EndpointError::InsecureHttp(
            url.host_str().unwrap_or_default().to_owned(),
        ));
    }
    Ok(())
}

fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return ip.is_loopback();
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// `url` with its user, password and every query value replaced by `[redacted]`; in
/// text that does not parse as a URL, whatever precedes an `@` and follows a `?` or `#`.
///
/// ```
/// use decompose::endpoint::redact_url;
///
/// assert_eq!(
///     redact_url("https://me:pw@api.example.com/v1?api_key=sk-1&v=2"),
///     "https://[redacted]@api.example.com/v1?api_key=[redacted]&v=[redacted]"
/// );
/// assert_eq!(redact_url("http://127.0.0.1:11434/v1"), "http://127.0.0.1:11434/v1");
/// ```
pub fn redact_url(url: &str) -> String {
    let Ok(parsed) = Url::parse(url) else {
        return cut_after_authority(url);
    };
    let mut out = format!("{}://", parsed.scheme());
    if !parsed.username().is_empty() || parsed.password().is_some() {
        out.push_str(REDACTED);
        out.push('@');
    }
    out.push_str(parsed.host_str().unwrap_or_default());
    if let Some(port) = parsed.port() {
        out.push_str(&format!(":{port}"));
    }
    out.push_str(parsed.path());
    if let Some(query) = parsed.query() {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}={REDACTED}"),
                None if pair.is_empty() => String::new(),
                None => REDACTED.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if parsed.fragment().is_some() {
        out.push('#');
        out.push_str(REDACTED);
    }
    out
}

fn cut_after_authority(text: &str) -> String {
    let (head, mut rest) = text.split_at(text.find("://").map_or(0, |i| i + 3));
    let mut out = head.to_owned();
    if let Some(at) = rest.rfind('@') {
        out.push_str(REDACTED);
        out.push('@');
        rest = &rest[at + 1..];
    }
    match rest.find(['?', '#']) {
        Some(i) => {
            out.push_str(&rest[..=i]);
            out.push_str(REDACTED);
        }
        None => out.push_str(rest),
    }
    out
}

/// The credentials a URL carries, as they appear in its text (user, password, query
/// values, fragment), so that text quoting them can be scrubbed.
pub fn url_secrets(url: &str) -> Vec<String> {
    let Ok(parsed) = Url::parse(url) else {
        return Vec::new();
    };
    let mut secrets = vec![parsed.username().to_owned()];
    secrets.extend(parsed.password().map(str::to_owned));
    if let Some(query) = parsed.query() {
        secrets.extend(
            query
                .split('&')
                .map(|pair| pair.split_once('=').map_or(pair, |(_, value)| value).to_owned()),
        );
    }
    secrets.extend(parsed.fragment().map(str::to_owned));
    secrets.retain(|s| !s.is_empty());
    secrets
}
