//! Keeping the database password out of every message: the URL as it may be shown, and
//! a scrub for driver messages that might quote it.

const HIDDEN: &str = "***";

/// `url` with its password replaced by `***`: the user info of a
/// `postgres://user:password@host/db` URL, a `password=` query parameter, and the
/// `password` key of a `key=value` connection string.
///
/// ```
/// assert_eq!(
///     board_postgres::redact_url("postgres://ana:s3cret@db:5432/board?password=x&sslmode=disable"),
///     "postgres://ana:***@db:5432/board?password=***&sslmode=disable"
/// );
/// assert_eq!(board_postgres::redact_url("host=db password='a b' user=ana"), "host=db password=*** user=ana");
/// ```
pub fn redact_url(url: &str) -> String {
    rewrite_password(url, HIDDEN)
}

/// Replaces every password in `url` with `hidden`.
fn rewrite_password(url: &str, hidden: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            let authority = match authority.rsplit_once('@') {
                Some((user_info, hosts)) => match user_info.split_once(':') {
                    Some((user, _)) => format!("{user}:{hidden}@{hosts}"),
                    None => authority.to_owned(),
                },
                None => authority.to_owned(),
            };
            let tail = match tail.split_once('?') {
                Some((path, query)) => format!("{path}?{}", rewrite_query(query, hidden)),
                None => tail.to_owned(),
            };
            format!("{scheme}://{authority}{tail}")
        }
        None => rewrite_key_values(url, hidden),
    }
}

fn rewrite_query(query: &str, hidden: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some(("password", _)) => format!("password={hidden}"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Replaces the value of `password` in a libpq `key=value` string, quoted or not.
fn rewrite_key_values(text: &str, hidden: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("password") {
        let (before, after) = rest.split_at(at + "password".len());
        out.push_str(before);
        let trimmed = after.trim_start();
        let Some(value) = trimmed.strip_prefix('=') else {
            rest = after;
            continue;
        };
        let value = value.trim_start();
        let consumed = match value.strip_prefix('\'') {
            Some(quoted) => quoted_length(quoted) + 1,
            None => value.find(char::is_whitespace).unwrap_or(value.len()),
        };
        rest = &value[consumed..];
        out.push('=');
        out.push_str(hidden);
    }
    out.push_str(rest);
    out
}

/// The length of a single-quoted value up to and including its closing quote
/// (backslash escapes as libpq reads them).
fn quoted_length(quoted: &str) -> usize {
    let mut escaped = false;
    for (i, c) in quoted.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\'' => return i + 1,
            _ => {}
        }
    }
    quoted.len()
}

/// `message` with every occurrence of `password` replaced, for driver messages that
/// might echo what they were given.
pub(crate) fn scrub(message: String, password: Option<&str>) -> String {
    match password {
        Some(p) if !p.is_empty() => message.replace(p, HIDDEN),
        _ => message,
    }
}
