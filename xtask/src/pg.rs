//! The PostgreSQL server of the suites and benchmarks: `KANBAN_TEST_DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`), and whether anything answers at
//! its address. xtask links no database client, so "reachable" means a TCP (or Unix
//! socket) connection opens within a few seconds; the suites themselves say what is
//! wrong past that.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

pub(crate) const URL_VAR: &str = "KANBAN_TEST_DATABASE_URL";
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const DEFAULT_PORT: u16 = 5432;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Where libpq looks for the server's socket when a URL names no host.
const SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// How to point the suites and benchmarks at a server.
pub(crate) const HINT: &str =
    "set KANBAN_TEST_DATABASE_URL=postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE to use a server";

/// One address a URL names.
#[derive(Debug, PartialEq, Eq)]
enum Endpoint {
    Tcp(String, u16),
    Socket(PathBuf),
}

/// The server's URL, as given.
pub(crate) struct Server {
    url: String,
}

impl Server {
    pub(crate) fn from_env() -> Server {
        Server {
            url: std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.to_owned()),
        }
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The URL with any password replaced by `***`, for messages.
    pub(crate) fn shown(&self) -> String {
        hide_password(&self.url)
    }

    /// Whether a connection to one of the URL's addresses opens; if not, why.
    pub(crate) fn reachable(&self) -> Result<(), String> {
        let endpoints = endpoints(&self.url);
        let mut last = "the URL names no address".to_owned();
        for endpoint in &endpoints {
            match connect(endpoint) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

fn connect(endpoint: &Endpoint) -> Result<(), String> {
    match endpoint {
        Endpoint::Tcp(host, port) => {
            let addrs = (host.as_str(), *port)
                .to_socket_addrs()
                .map_err(|e| format!("{host}:{port}: {e}"))?;
            let mut last = format!("{host}:{port}: no address");
            for addr in addrs {
                match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                    Ok(_) => return Ok(()),
                    Err(e) => last = format!("{addr}: {e}"),
                }
            }
            Err(last)
        }
        Endpoint::Socket(path) => std::os::unix::net::UnixStream::connect(path)
            .map(drop)
            .map_err(|e| format!("{}: {e}", path.display())),
    }
}

/// The addresses of a `postgres://` URL or a libpq `key=value` string: each host of a
/// comma-separated list with its port, a host that is a directory being a Unix socket.
fn endpoints(url: &str) -> Vec<Endpoint> {
    let (hosts, ports) = host_and_port(url);
    let ports: Vec<u16> = ports
        .split(',')
        .map(|p| p.trim().parse().unwrap_or(DEFAULT_PORT))
        .collect();
    let port_of = |i: usize| match ports.as_slice() {
        [one] => one.to_owned(),
        many => many.get(i).copied().unwrap_or(DEFAULT_PORT),
    };
    let mut out = Vec::new();
    for (i, host) in hosts.split(',').map(str::trim).enumerate() {
        let (host, port) = split_port(host, port_of(i));
        if host.is_empty() {
            out.extend(
                SOCKET_DIRS
                    .iter()
                    .map(|dir| Endpoint::Socket(PathBuf::from(dir).join(format!(".s.PGSQL.{port}")))),
            );
        } else if host.starts_with('/') {
            out.push(Endpoint::Socket(
                PathBuf::from(host).join(format!(".s.PGSQL.{port}")),
            ));
        } else {
            out.push(Endpoint::Tcp(host.to_owned(), port));
        }
    }
    out
}

/// `host[:port]` or `[v6][:port]`; a host without a port keeps `default`.
fn split_port(host: &str, default: u16) -> (&str, u16) {
    if let Some(v6) = host.strip_prefix('[') {
        if let Some((addr, rest)) = v6.split_once(']') {
            let port = rest.strip_prefix(':').and_then(|p| p.parse().ok());
            return (addr, port.unwrap_or(default));
        }
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, port.parse().unwrap_or(default)),
        _ => (host, default),
    }
}

/// The host list (ports inline, as a URL writes them) and the separate port list.
fn host_and_port(url: &str) -> (String, String) {
    let mut host = String::new();
    let mut port = String::new();
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"));
    let pairs: Vec<(String, String)> = match rest {
        Some(rest) => {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let authority = &rest[..end];
            host = decode(authority.rsplit_once('@').map_or(authority, |(_, h)| h));
            rest.split_once('?')
                .map(|(_, query)| {
                    query
                        .split('&')
                        .filter_map(|pair| pair.split_once('='))
                        .map(|(k, v)| (k.to_owned(), decode(v)))
                        .collect()
                })
                .unwrap_or_default()
        }
        None => url
            .split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
            .collect(),
    };
    for (key, value) in pairs {
        match key.as_str() {
            "host" => host = value,
            "port" => port = value,
            _ => {}
        }
    }
    (host, port)
}

/// Percent-decoding of one URL component; a malformed escape stays as written.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Replaces the password of `user:password@` and the value of every `password=`.
fn hide_password(url: &str) -> String {
    let mut shown = url.to_owned();
    if let Some(scheme_end) = shown.find("://") {
        let start = scheme_end + 3;
        let end = shown[start..].find(['/', '?']).map_or(shown.len(), |e| start + e);
        if let Some(at) = shown[start..end].rfind('@') {
            if let Some(colon) = shown[start..start + at].find(':') {
                shown.replace_range(start + colon + 1..start + at, "***");
            }
        }
    }
    let mut from = 0;
    while let Some(found) = shown[from..].find("password=") {
        let value = from + found + "password=".len();
        let end = if shown[value..].starts_with('\'') {
            shown[value + 1..]
                .find('\'')
                .map_or(shown.len(), |e| value + e + 2)
        } else {
            shown[value..]
                .find(|c: char| c == '&' || c.is_whitespace())
                .map_or(shown.len(), |e| value + e)
        };
        shown.replace_range(value..end, "***");
        from = value + 3;
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp(host.to_owned(), port)
    }

    #[test]
    fn endpoints_of_urls_and_key_values() {
        assert_eq!(endpoints(DEFAULT_URL), [tcp("127.0.0.1", 5432)]);
        assert_eq!(
            endpoints("postgresql://ana:pw@db.internal/board"),
            [tcp("db.internal", 5432)]
        );
        assert_eq!(endpoints("postgres://[::1]:6543/x"), [tcp("::1", 6543)]);
        assert_eq!(
            endpoints("postgres://a:1,b:2/x?sslmode=disable"),
            [tcp("a", 1), tcp("b", 2)]
        );
        assert_eq!(
            endpoints("postgres:///test?host=%2Fvar%2Frun%2Fpostgresql&port=5433"),
            [Endpoint::Socket("/var/run/postgresql/.s.PGSQL.5433".into())]
        );
        assert_eq!(endpoints("host=db port=7000 user=ana"), [tcp("db", 7000)]);
        assert_eq!(endpoints("postgres://u@h:notaport/x"), [tcp("h", 5432)]);
        assert_eq!(endpoints("dbname=test").len(), SOCKET_DIRS.len());
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(hide_password(DEFAULT_URL), DEFAULT_URL);
        assert_eq!(
            hide_password("postgres://ana:s3:cr@t@db:5432/b?password=x&sslmode=disable"),
            "postgres://ana:***@db:5432/b?password=***&sslmode=disable"
        );
        assert_eq!(
            hide_password("host=db password=pw user=ana"),
            "host=db password=*** user=ana"
        );
        assert_eq!(
            hide_password("host=db password='a b' user=ana"),
            "host=db password=*** user=ana"
        );
    }
}
