//! A card's page offers only what its status and claim allow, says why assigning or
//! retitling is not offered, shows why a blocked card waits, and the site has an icon.

mod common;

use board_core::{BoardWrites, NewTask};

/// The actions a card's page offers, in its order.
fn offered(page: &str) -> Vec<String> {
    page.split("<form data-action=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_card_offers_only_the_actions_its_status_allows() {
    let s = common::serve().await;
    let ready = s.task("ready card");
    let triage = s
        .store
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("triage card")
            },
            common::NOW,
        )
        .unwrap();
    let running = s.task("running card");
    s.store.claim(&running.id, 900, common::NOW).unwrap();
    let blocked = s.task("blocked card");
    s.store
        .block(
            &blocked.id,
            None,
            Some("needs the <vault> password".into()),
            None,
            common::NOW,
        )
        .unwrap();

    let on_ready = s.text(&format!("/tasks/{}", ready.id)).await;
    assert_eq!(
        offered(&on_ready),
        ["comment", "assign", "edit", "archive"],
        "{on_ready}"
    );
    assert_eq!(
        offered(&s.text(&format!("/tasks/{}", triage.id)).await),
        ["comment", "assign", "edit", "decompose", "archive"]
    );
    let on_running = s.text(&format!("/tasks/{}", running.id)).await;
    assert_eq!(offered(&on_running), ["comment", "edit", "reclaim", "archive"]);
    assert!(
        on_running.contains(
            "<p class=\"unavailable\" data-action=\"assign\">Assign: a worker holds it: reclaim it first</p>"
        ),
        "{on_running}"
    );
    let on_blocked = s.text(&format!("/tasks/{}", blocked.id)).await;
    assert_eq!(
        offered(&on_blocked),
        ["comment", "assign", "edit", "unblock", "archive"]
    );
    assert!(
        on_blocked.contains("<p class=\"blocked-reason\">Blocked: needs the &lt;vault&gt; password</p>"),
        "{on_blocked}"
    );
    assert!(!on_ready.contains("blocked-reason"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_site_has_an_icon() {
    let s = common::serve().await;
    let page = s.text("/").await;
    assert!(
        page.contains("<link rel=\"icon\" href=\"assets/favicon.svg\""),
        "{page}"
    );
    for path in ["/favicon.ico", "/assets/favicon.svg"] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], "image/svg+xml", "{path}");
    }
}
