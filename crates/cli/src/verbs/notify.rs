//! `notify-subscribe`, `notify-list`, `notify-unsubscribe`, `notify-resume`: webhooks the
//! gateway calls with a task's events, or the board's (docs/gateway.md#notifications).

use board_core::notify::{NewSubscription, Subscription};
use serde_json::json;

use crate::args::NotifySubscribeArgs;
use crate::failure::Failure;
use crate::output::{local_time, plain, print_json};
use crate::verbs::Ctx;

/// `kanban notify-subscribe ID|--all --webhook URL [--kinds a,b] [--secret S]`.
pub fn subscribe(ctx: &Ctx, a: NotifySubscribeArgs) -> Result<(), Failure> {
    let (secret, made_here) = match a.secret {
        Some(secret) => (secret, false),
        None => (fresh_secret()?, true),
    };
    let new = NewSubscription {
        task_id: a.id,
        kinds: a.kinds,
        url: a.webhook,
        secret,
    };
    let sub = ctx.store.subscribe(&new, ctx.now)?;
    if ctx.json {
        let mut doc = shown(&sub);
        if made_here {
            doc["secret"] = json!(sub.secret);
        }
        print_json(&doc);
        return Ok(());
    }
    println!(
        "Subscribed {}: {} -> {} ({})",
        sub.id,
        heard(&sub),
        masked(&sub.url),
        sub.kinds.join(", ")
    );
    if made_here {
        println!(
            "secret: {}  (shown once: the receiver checks X-Kanban-Signature, sha256= and the HMAC-SHA256 of the body, with it)",
            sub.secret
        );
    }
    Ok(())
}

/// `kanban notify-list`.
pub fn list(ctx: &Ctx) -> Result<(), Failure> {
    let subs = ctx.store.subscriptions()?;
    if ctx.json {
        print_json(&json!(subs.iter().map(shown).collect::<Vec<_>>()));
        return Ok(());
    }
    if subs.is_empty() {
        println!("No subscriptions");
    }
    for sub in &subs {
        let state = if sub.paused {
            format!(
                "paused after {} failures (kanban notify-resume {})",
                sub.failures, sub.id
            )
        } else if sub.failures > 0 {
            format!("retrying ({} failures)", sub.failures)
        } else {
            "active".to_owned()
        };
        let last = match (&sub.last_status, sub.last_attempt_at) {
            (Some(status), Some(at)) => format!(" · last {} at {}", plain(status, false), local_time(at)),
            _ => String::new(),
        };
        println!(
            "[{}] {}  {}  {}  {state} · after event {}{last}",
            sub.id,
            heard(sub),
            masked(&sub.url),
            sub.kinds.join(","),
            sub.after_event
        );
    }
    Ok(())
}

/// `kanban notify-unsubscribe N`.
pub fn unsubscribe(ctx: &Ctx, id: i64) -> Result<(), Failure> {
    let gone = ctx.store.unsubscribe(id)?;
    match ctx.json {
        true => print_json(&shown(&gone)),
        false => println!("Unsubscribed {id} ({})", masked(&gone.url)),
    }
    Ok(())
}

/// `kanban notify-resume N`.
pub fn resume(ctx: &Ctx, id: i64) -> Result<(), Failure> {
    let sub = ctx.store.resume_subscription(id)?;
    match ctx.json {
        true => print_json(&shown(&sub)),
        false => println!(
            "Resumed {id} ({}): delivered from event {} on",
            masked(&sub.url),
            sub.after_event + 1
        ),
    }
    Ok(())
}

/// A subscription as `--json` shows it: its URL masked, its secret never.
fn shown(sub: &Subscription) -> serde_json::Value {
    let mut doc = json!(sub);
    doc["url"] = json!(masked(&sub.url));
    doc
}

fn heard(sub: &Subscription) -> String {
    sub.task_id
        .as_ref()
        .map_or_else(|| "board".to_owned(), ToString::to_string)
}

/// A webhook URL without its query or fragment, which may hold a token.
fn masked(url: &str) -> String {
    match url.find(['?', '#']) {
        Some(i) => format!("{}?…", plain(&url[..i], false)),
        None => plain(url, false),
    }
}

/// 32 random bytes as hex: a subscription's signing key.
fn fresh_secret() -> Result<String, Failure> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Failure::Refused(format!("no randomness for a secret: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
