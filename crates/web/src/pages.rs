//! The pages: the board (static, drawn by its script from `/api/cards` and kept live by
//! `/api/events`), a card's detail (rendered here, every piece of card text escaped),
//! and the embedded assets. Every page carries a content security policy that allows
//! only this server's own scripts, styles and connections.

use std::fmt::Write;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use board_core::shapes::{age, Shown};
use board_core::{LlmCall, Status, Timestamp};

use crate::api::task_id;
use crate::html::{element, escape, markdown};
use crate::{blocking, ApiError, App};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; base-uri 'self'; frame-ancestors 'none'";

pub fn routes() -> Router<App> {
    Router::new()
        .route("/", get(board))
        .route("/tasks/{id}", get(detail))
        .route("/tasks/{id}/drawer", get(drawer))
        .route(
            "/assets/board.js",
            get(|| async { asset("text/javascript", include_str!("../assets/board.js")) }),
        )
        .route(
            "/assets/detail.js",
            get(|| async { asset("text/javascript", include_str!("../assets/detail.js")) }),
        )
        .route(
            "/assets/kanban.css",
            get(|| async { asset("text/css", include_str!("../assets/kanban.css")) }),
        )
        .route("/assets/favicon.svg", get(icon))
        .route("/favicon.ico", get(icon))
}

/// An HTML page with the security headers every page carries.
pub fn page(html: String) -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // A token given in the address must not leave in a Referer.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Where a board's pages are served, and the boards beside it (docs/boards.md): every
/// page's links are relative to its `<base>`, so one set of pages serves any board.
#[derive(Clone, Debug, Default)]
pub struct Chrome {
    /// The path the board is served under: empty when it is the server's only board,
    /// else `/b/SLUG`.
    pub base: String,
    /// The board's slug and display name.
    pub slug: String,
    pub name: String,
    /// Every board of the server, `(slug, name)`, when it serves more than one.
    pub boards: Vec<(String, String)>,
}

impl Chrome {
    /// The `<base>` every page's relative links resolve against.
    fn base_tag(&self) -> String {
        format!("<base href=\"{}/\">", escape(&self.base))
    }

    /// The board's own page.
    fn home(&self) -> String {
        match self.base.is_empty() {
            true => "/".to_owned(),
            false => escape(&self.base),
        }
    }

    /// The board switcher: every board of the server, this one marked; nothing when it
    /// serves one board.
    fn switcher(&self) -> String {
        if self.boards.len() < 2 {
            return String::new();
        }
        let mut out = format!(
            "<details class=\"boards\"><summary>Board: {}</summary><ul>",
            escape(&self.name)
        );
        for (slug, name) in &self.boards {
            let current = if *slug == self.slug {
                " aria-current=\"page\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<li><a href=\"/b/{}\"{current}>{}</a></li>",
                escape(slug),
                escape(name)
            );
        }
        out.push_str("</ul></details>");
        out
    }
}

/// The site's icon (browsers ask for `/favicon.ico` on every page).
async fn icon() -> Response {
    asset("image/svg+xml", include_str!("../assets/favicon.svg"))
}

/// The board page: the static page with its board's base and switcher.
async fn board(State(app): State<App>) -> Response {
    let chrome = &app.chrome;
    page(
        include_str!("../assets/board.html")
            .replace("{{base}}", &chrome.base_tag())
            .replace("{{home}}", &chrome.home())
            .replace("{{boards}}", &chrome.switcher()),
    )
}

/// The head and top bar every page shares.
pub fn shell(chrome: &Chrome, title: &str, script: Option<&str>) -> String {
    let script = script.map_or_else(String::new, |s| {
        format!("<script src=\"assets/{s}\" defer></script>")
    });
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{base}\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"icon\" href=\"assets/favicon.svg\" type=\"image/svg+xml\">\
         <link rel=\"stylesheet\" href=\"assets/kanban.css\">{script}</head><body>\
         <header><a href=\"{home}\" class=\"brand\">kanban</a>{boards}<nav><a href=\"{home}\">Board</a>\
         <a href=\"stats\">Stats</a></nav></header><main>",
        escape(title),
        base = chrome.base_tag(),
        home = chrome.home(),
        boards = chrome.switcher(),
    )
}

async fn detail(State(app): State<App>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let chrome = app.chrome.clone();
    let (title, article) = card(&app, &id).await?;
    let mut out = shell(&chrome, &title, Some("detail.js"));
    out.push_str(&article);
    out.push_str("</main></body></html>");
    Ok(page(out))
}

/// A card as the board's drawer shows it: its page's article alone.
async fn drawer(State(app): State<App>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let (_, article) = card(&app, &id).await?;
    Ok(page(article))
}

/// A card's page title and its article, every section read from the board.
async fn card(app: &App, id: &str) -> Result<(String, String), ApiError> {
    let id = task_id(id)?;
    let log = app.settings.log.clone();
    let secrets = app.settings.secrets.clone();
    let now = (app.clock)();
    blocking(app, move |s| {
        let shown = Shown::read(s, &id)?;
        let bill = s.llm_calls(Some(&id))?;
        let graph = crate::graph::Graph::read(s, &shown.task)?;
        let tail = log
            .as_ref()
            .and_then(|read| crate::log::tail(read, &id, &secrets));
        let title = format!("{} {}", shown.task.id, shown.task.title);
        let article = render_card((&shown, &graph), &bill, tail.as_ref(), &secrets, now);
        Ok((title, article))
    })
    .await
}

fn render_card(
    (s, graph): (&Shown, &crate::graph::Graph),
    bill: &[LlmCall],
    log: Option<&crate::log::Tail>,
    secrets: &[String],
    now: Timestamp,
) -> String {
    let t = &s.task;
    let mut out = String::new();
    let _ = write!(
        out,
        "<article class=\"detail\" data-id=\"{id}\" data-status=\"{status}\"><h1><span class=\"id\">{id}</span> {title}</h1>\
         <p class=\"facts\"><span class=\"status s-{status}\">{status}</span> · priority {pri} · assignee {who} · \
         created {age} ago · revision {rev}{reviewer}</p><p class=\"message\" role=\"status\"></p>",
        id = escape(t.id.as_str()),
        status = t.status,
        title = escape(&t.title),
        pri = t.priority,
        who = escape(t.assignee.as_deref().unwrap_or("nobody")),
        age = age(now, t.created_at),
        rev = t.revision,
        reviewer = t
            .reviewer
            .as_deref()
            .map_or_else(String::new, |r| format!(" · reviewer {}", escape(r))),
    );
    block_reason(&mut out, s);
    actions(&mut out, t);
    log_section(&mut out, t, log);
    out.push_str("<section><h2>Body</h2><div class=\"markdown\">");
    out.push_str(&markdown(&t.body));
    out.push_str("</div></section>");
    for (title, text) in [("Result", &t.result), ("Last failure", &t.last_failure_error)] {
        if let Some(text) = text {
            let _ = write!(
                out,
                "<section><h2>{title}</h2><pre>{}</pre></section>",
                escape(text)
            );
        }
    }
    crate::files::section(&mut out, &s.attachments);
    task_links(&mut out, "Parents", &s.parents);
    task_links(&mut out, "Children", &s.children);
    graph.section(&mut out);
    runs_section(&mut out, s, now);
    evidence_section(&mut out, s, secrets);
    bill_section(&mut out, bill);
    comments_section(&mut out, s, now);
    out.push_str("<section><h2>Events</h2><ol class=\"events\">");
    for e in &s.events {
        out.push_str("<li>");
        element(
            &mut out,
            "code",
            &format!("#{} {} ago {}", e.id, age(now, e.created_at), e.kind),
        );
        if !e.payload.is_null() {
            element(&mut out, "span", &e.payload.to_string());
        }
        out.push_str("</li>");
    }
    out.push_str("</ol></section></article>");
    out
}

/// The card's worker log: its end as read now and, while a worker or verifier runs, the
/// rest as it comes (the page's script follows `api/tasks/ID/log` from `data-after`).
/// A card that has no log and runs nothing has no section.
fn log_section(out: &mut String, t: &board_core::Task, log: Option<&crate::log::Tail>) {
    let live = matches!(t.status, Status::Running | Status::Verifying);
    if log.is_none() && !live {
        return;
    }
    let _ = write!(
        out,
        "<section class=\"worker-log\"><h2>Worker log{}</h2><pre class=\"log\" tabindex=\"0\" data-after=\"{}\"{}>{}</pre></section>",
        if live { " (live)" } else { "" },
        log.map_or(0, |l| l.end),
        if live { " data-live" } else { "" },
        escape(log.map_or("", |l| l.text.as_str())),
    );
}

/// Why a blocked card waits: the reason of the event that blocked it.
fn block_reason(out: &mut String, s: &Shown) {
    if let (Status::Blocked, Some(reason)) = (s.task.status, &s.block_reason) {
        let _ = write!(out, "<p class=\"blocked-reason\">Blocked: {}</p>", escape(reason));
    }
}

/// A card's comments, each as Markdown.
fn comments_section(out: &mut String, s: &Shown, now: Timestamp) {
    out.push_str("<section><h2>Comments</h2>");
    for c in &s.comments {
        let _ = write!(
            out,
            "<div class=\"comment\"><p class=\"meta\">{} · {} ago</p><div class=\"markdown\">{}</div></div>",
            escape(c.author.as_deref().unwrap_or("anonymous")),
            age(now, c.created_at),
            markdown(&c.body)
        );
    }
    out.push_str("</section>");
}

/// The forms the detail script sends to the API: only the actions the card's status
/// and claim allow (`board_core::card_actions`); assigning and retitling, which people
/// reach for most, show why they are not offered. A task in review gets its verdicts
/// first, in a section of their own.
fn actions(out: &mut String, task: &board_core::Task) {
    use board_core::card_actions::CardAction;
    let form = |action: CardAction| -> &'static str {
        match action {
            CardAction::Approve => "<button>Approve</button>",
            CardAction::RequestChanges => {
                "<textarea name=\"reason\" placeholder=\"What must change\" required></textarea><button>Request changes</button>"
            }
            CardAction::Comment => {
                "<textarea name=\"body\" placeholder=\"Comment\" required></textarea><button>Comment</button>"
            }
            CardAction::Assign => "<input name=\"assignee\" placeholder=\"profile (empty clears)\"><button>Assign</button>",
            CardAction::Edit => "<input name=\"title\" placeholder=\"new title\"><button>Retitle</button>",
            CardAction::Decompose => "<button>Decompose</button>",
            CardAction::Unblock => "<button>Unblock</button>",
            CardAction::Reclaim => "<button>Reclaim</button>",
            CardAction::Archive => "<button>Archive</button>",
        }
    };
    let review = [CardAction::Approve, CardAction::RequestChanges];
    if review.iter().all(|a| a.refused(task).is_none()) {
        out.push_str("<section class=\"actions review\"><h2>Review</h2>");
        for action in review {
            let _ = write!(
                out,
                "<form data-action=\"{}\">{}</form>",
                action.as_str(),
                form(action)
            );
        }
        out.push_str("</section>");
    }
    out.push_str("<section class=\"actions\"><h2>Actions</h2>");
    for action in CardAction::ALL.into_iter().filter(|a| !review.contains(a)) {
        match action.refused(task) {
            None => {
                let _ = write!(
                    out,
                    "<form data-action=\"{}\">{}</form>",
                    action.as_str(),
                    form(action)
                );
            }
            Some(why) if matches!(action, CardAction::Assign | CardAction::Edit) => {
                let _ = write!(
                    out,
                    "<p class=\"unavailable\" data-action=\"{}\">{}: {why}</p>",
                    action.as_str(),
                    if action == CardAction::Assign {
                        "Assign"
                    } else {
                        "Retitle"
                    }
                );
            }
            Some(_) => {}
        }
    }
    out.push_str("</section>");
}

fn task_links(out: &mut String, title: &str, tasks: &[board_core::Task]) {
    let _ = write!(out, "<section><h2>{title}</h2><ul>");
    if tasks.is_empty() {
        out.push_str("<li class=\"none\">none</li>");
    }
    for t in tasks {
        let _ = write!(
            out,
            "<li><a href=\"tasks/{id}\">{id}</a> <span class=\"status s-{st}\">{st}</span> {title}</li>",
            id = escape(t.id.as_str()),
            st = t.status,
            title = escape(&t.title)
        );
    }
    out.push_str("</ul></section>");
}

fn runs_section(out: &mut String, s: &Shown, now: Timestamp) {
    out.push_str("<section><h2>Runs</h2><table class=\"runs\"><tr><th>Run</th><th>Kind</th><th>Outcome</th><th>Took</th><th>Held by</th><th>Summary or error</th></tr>");
    for r in &s.runs {
        let outcome = r.outcome.map_or("running", |o| o.as_str());
        let host = match &r.lane {
            Some(lane) => format!("lane {lane}"),
            None => r
                .metadata
                .as_ref()
                .and_then(|m| m.get("host"))
                .and_then(|h| h.as_str())
                .or(r.profile.as_deref())
                .unwrap_or("-")
                .to_owned(),
        };
        let note = r.summary.as_deref().or(r.error.as_deref()).unwrap_or("");
        let _ = write!(
            out,
            "<tr><td>#{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.id,
            r.kind,
            escape(outcome),
            age(r.ended_at.unwrap_or(now), r.started_at),
            escape(&host),
            escape(note)
        );
    }
    out.push_str("</table></section>");
}

/// What backed each run's completion: a worker's evidence, the verifiers' commands with
/// their exits and output tails. Output is untrusted: blanked and masked as a log is.
fn evidence_section(out: &mut String, s: &Shown, secrets: &[String]) {
    let backed: Vec<&board_core::Run> = s.runs.iter().filter(|r| r.evidence.is_some()).collect();
    if backed.is_empty() {
        return;
    }
    out.push_str("<section><h2>Evidence and verifier output</h2>");
    for r in backed {
        let evidence = r.evidence.as_ref().map(|e| match e {
            serde_json::Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        });
        let _ = write!(
            out,
            "<h3>Run #{} ({}, {})</h3><pre class=\"evidence\">{}</pre>",
            r.id,
            r.kind,
            escape(r.outcome.map_or("running", |o| o.as_str())),
            escape(&crate::log::shown(&evidence.unwrap_or_default(), secrets))
        );
    }
    out.push_str("</section>");
}

fn bill_section(out: &mut String, bill: &[LlmCall]) {
    let tokens: i64 = bill
        .iter()
        .map(|c| c.prompt_tokens.unwrap_or(0) + c.completion_tokens.unwrap_or(0))
        .sum();
    let failed = bill
        .iter()
        .filter(|c| c.outcome != board_core::LlmOutcome::Ok)
        .count();
    let _ = write!(
        out,
        "<section><h2>LLM bill</h2><p class=\"bill\">{} requests · {tokens} tokens · {failed} failed</p></section>",
        bill.len()
    );
}
