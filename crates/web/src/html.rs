//! Safe HTML from untrusted text: escaping, and Markdown rendered with every raw HTML
//! block and inline tag shown as text and every link limited to harmless schemes.

use std::fmt::Write;

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// Text escaped for an HTML element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Markdown as HTML. Raw HTML becomes visible text; an image becomes a link to it (the
/// page fetches nothing a card names); a link or image whose scheme is not http, https
/// or mailto (a `javascript:` URL, say) points nowhere.
pub fn markdown(text: &str) -> String {
    let events =
        Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(|e| match e {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            })
            | Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Link {
                link_type,
                dest_url: safe_url(dest_url),
                title,
                id,
            }),
            Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
            e => e,
        });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim().to_ascii_lowercase();
    let scheme = lower.split_once(':').map(|(s, _)| s);
    let relative = scheme.is_none_or(|s| s.contains(['/', '?', '#']));
    if relative || matches!(scheme, Some("http" | "https" | "mailto")) {
        url
    } else {
        CowStr::Borrowed("#")
    }
}

/// Appends `<tag>escaped text</tag>`.
pub fn element(out: &mut String, tag: &str, text: &str) {
    let _ = write!(out, "<{tag}>{}</{tag}>", escape(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_script_urls_are_inert() {
        let html = markdown("<script>alert(1)</script>\n\nhi <b onclick=x>b</b> [x](javascript:alert(1)) ![i](http://e/i.png)");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<b "), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("href=\"http://e/i.png\""), "{html}");
    }
}
