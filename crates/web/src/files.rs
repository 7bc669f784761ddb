//! A card's files on the web board: a list on its page (images shown inline) and a
//! download route. A file is served as a download with `nosniff` and a sandboxing
//! policy, so no file (an HTML page, an SVG with a script) runs as the board's page;
//! only raster images of the common kinds are served inline.

use std::fmt::Write;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use board_core::Attachment;
use serde::Deserialize;

use crate::error::ApiError;
use crate::html::escape;
use crate::{blocking, App};

/// The types a browser may show inline: raster images, none of which runs code.
const INLINE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

pub fn routes() -> Router<App> {
    Router::new().route("/api/attachments/{id}", get(download))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DownloadQuery {
    #[serde(default)]
    inline: bool,
}

fn inline_type(file: &Attachment) -> Option<&'static str> {
    let kind = file.content_type.as_deref()?.split(';').next()?.trim();
    INLINE_TYPES
        .iter()
        .copied()
        .find(|t| t.eq_ignore_ascii_case(kind))
}

async fn download(
    State(app): State<App>,
    Path(id): Path<String>,
    query: Result<Query<DownloadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    let id: i64 = id.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "not an attachment id: {:?}",
            id.chars().take(40).collect::<String>()
        ))
    })?;
    let (file, bytes) = blocking(&app, move |s| Ok(s.attachment(id)?)).await?;
    let shown = inline_type(&file).filter(|_| q.inline);
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    let kind = shown.unwrap_or("application/octet-stream");
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    let disposition = format!(
        "{}; filename*=UTF-8''{}",
        if shown.is_some() { "inline" } else { "attachment" },
        percent_encoded(&file.name)
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    Ok(response)
}

/// A file name as RFC 5987 wants it in `filename*`: unreserved bytes kept, the rest
/// percent-encoded.
fn percent_encoded(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The files section of a card's page: each a download link, an image shown inline.
pub fn section(out: &mut String, files: &[Attachment]) {
    if files.is_empty() {
        return;
    }
    out.push_str("<section><h2>Attachments</h2><ul class=\"attachments\">");
    for f in files {
        // Relative to the page's `<base>`: the board's own path.
        let href = format!("api/attachments/{}", f.id);
        let _ = write!(
            out,
            "<li><a href=\"{href}\" download>{}</a> <span class=\"meta\">{} bytes · {}</span>",
            escape(&f.name),
            f.size,
            escape(f.content_type.as_deref().unwrap_or("unknown type"))
        );
        if inline_type(f).is_some() {
            let _ = write!(
                out,
                "<br><img src=\"{href}?inline=true\" alt=\"{}\" loading=\"lazy\" class=\"attachment\">",
                escape(&f.name)
            );
        }
        out.push_str("</li>");
    }
    out.push_str("</ul></section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded_for_the_header() {
        assert_eq!(percent_encoded("a b\"c.txt"), "a%20b%22c.txt");
        assert_eq!(percent_encoded("ü.png"), "%C3%BC.png");
    }
}
