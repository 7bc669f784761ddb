//! Who may talk to the server. With a token, every request must carry it (an
//! `Authorization: Bearer` header, the `kanban_token` cookie, or `?token=` once, which
//! sets the cookie). Without one the server is loopback only and read only: the `Host`
//! must name a loopback host so that a page on another site cannot reach it by DNS
//! rebinding, and nothing that changes the board is accepted, since any local process
//! (another user's, a sandboxed worker's) reaches loopback. A request that changes the
//! board must also come from the board's own pages: its `Origin`, when sent, must match
//! its `Host`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use axum::Json;
use serde_json::json;

const COOKIE: &str = "kanban_token";

#[derive(Clone)]
pub struct Access {
    token: Option<Arc<str>>,
    bound: IpAddr,
}

impl Access {
    pub fn new(token: Option<String>, bound: IpAddr) -> Access {
        Access {
            token: token.map(Arc::from),
            bound,
        }
    }
}

pub async fn check(State(access): State<Access>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let mut set_cookie = false;
    if let Some(token) = &access.token {
        let query = query_token(request.uri().query());
        set_cookie = query.as_deref().is_some_and(|q| same(q, token));
        let presented = bearer(headers).or_else(|| cookie(headers)).or(query);
        if !presented.is_some_and(|p| same(&p, token)) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "this board needs its token (Authorization: Bearer TOKEN, or ?token=TOKEN once)",
            );
        }
    } else if !host_is_loopback(headers, access.bound) {
        return refuse(
            StatusCode::FORBIDDEN,
            "the Host header does not name this loopback server",
        );
    }
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if changes && access.token.is_none() {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "this server has no token, so it takes no changes: serve the board with a token",
        );
    }
    if changes && !same_origin(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "cross-origin request refused: Origin does not match Host",
        );
    }
    let mut response = next.run(request).await;
    if set_cookie {
        if let Some(token) = &access.token {
            let value = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            if let Ok(v) = HeaderValue::from_str(&value) {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
        }
    }
    response
}

/// A refusal, on a connection that ends with it: the request's body is never read, so
/// the connection cannot carry another request, and `Connection: close` tells the
/// client to open a new one rather than send on the one the server is closing.
fn refuse(status: StatusCode, message: &str) -> Response {
    let mut response = (status, Json(json!({ "error": message }))).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Compares in time independent of where the strings first differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(|t| t.trim().to_owned())
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            pair.trim()
                .strip_prefix(COOKIE)?
                .strip_prefix('=')
                .map(str::to_owned)
        })
}

fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token=").map(percent_decode))
}

/// Decodes `%XX` escapes and `+`; a malformed escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host part of a `Host` header or an origin's authority, without port or brackets.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.rsplit_once(':').map_or(authority, |(host, _)| host)
}

fn host_is_loopback(headers: &HeaderMap, bound: IpAddr) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = host_name(host);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == bound)
}

/// True unless the request names an origin other than the host it was sent to. Requests
/// without `Origin` come from programs, not from pages on another site: browsers send it
/// on every cross-origin `POST`. The board's pages are served over HTTP, or over HTTPS by
/// a proxy in front that passes the `Host` on, so their origin is either scheme and then
/// exactly the `Host`; any other scheme, and the opaque `null`, is not one of its pages.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(Ok(host))) = (origin.to_str(), headers.get(header::HOST).map(|h| h.to_str()))
    else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    web && !host.is_empty() && authority.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_in_a_query_is_percent_decoded_and_a_malformed_escape_kept() {
        assert_eq!(percent_decode("%41%42c"), "ABc");
        assert_eq!(percent_decode("a+b%20c"), "a b c");
        assert_eq!(percent_decode("x%zz%4"), "x%zz%4");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(query_token(Some("a=1&token=s%2Bx+y")), Some("s+x y".to_owned()));
    }

    #[test]
    fn a_host_is_loopback_when_it_names_this_machine_or_the_bound_address() {
        let bound: IpAddr = "192.0.2.1".parse().unwrap();
        let with_host = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            host_is_loopback(&headers, bound)
        };
        assert!(with_host("127.0.0.1:8080"));
        assert!(with_host("[::1]:8080"));
        assert!(with_host("LocalHost"));
        assert!(with_host("192.0.2.1:8080"), "the address it is bound to");
        assert!(!with_host("192.0.2.2:8080"));
        assert!(!with_host("example.com"));
        assert!(!host_is_loopback(&HeaderMap::new(), bound), "no Host at all");
    }

    #[test]
    fn tokens_are_the_same_only_byte_for_byte() {
        assert!(same("secret", "secret"));
        assert!(!same("secret", "secreT"));
        // Differences that cancel out under XOR still differ.
        assert!(!same("ab", "ba"));
        assert!(!same("secret", "secret2"));
    }
}
