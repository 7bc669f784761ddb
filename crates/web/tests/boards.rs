//! Several boards on one server (docs/boards.md): each under `/b/SLUG/` with its own
//! store, the current one at the root too, a switcher on every page, one guard for all.

mod common;

use std::sync::Arc;
use std::time::Duration;

use board_core::memory::MemStore;
use board_core::{BoardReads, TaskFilter};
use serde_json::json;

use common::TOKEN;

struct Boards {
    base: String,
    client: reqwest::Client,
    ops: Arc<MemStore>,
    main: Arc<MemStore>,
}

async fn serve_two() -> Boards {
    let (base, main, ops) = common::serve_two_boards().await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().unwrap(),
    );
    Boards {
        base,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .default_headers(headers)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        ops,
        main,
    }
}

impl Boards {
    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn titles(&self, path: &str) -> Vec<String> {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_board_is_served_under_its_slug_and_the_current_one_at_the_root() {
    let s = serve_two().await;
    assert_eq!(s.titles("/api/tasks").await, ["on main"]);
    assert_eq!(s.titles("/b/main/api/tasks").await, ["on main"]);
    assert_eq!(s.titles("/b/ops/api/tasks").await, ["on ops"]);
    let made = s
        .client
        .post(format!("{}/b/ops/api/tasks", s.base))
        .json(&json!({"title": "made on ops"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status().as_u16(), 201);
    let count = |store: &MemStore| store.list(&TaskFilter::default()).unwrap().len();
    assert_eq!(
        (count(&s.main), count(&s.ops)),
        (1, 2),
        "a write lands on its board only"
    );

    let (status, page) = s.get("/b/ops").await;
    assert_eq!(status, 200);
    assert!(page.contains("<base href=\"/b/ops/\">"), "{page}");
    assert!(
        page.contains("<summary>Board: Ops &lt;script&gt;</summary>"),
        "{page}"
    );
    assert!(page.contains("<a href=\"/b/main\">Main</a>"), "{page}");
    assert!(
        page.contains("<a href=\"/b/ops\" aria-current=\"page\">"),
        "{page}"
    );
    assert!(!page.contains("<script>"), "a board's name is text: {page}");
    let (_, root) = s.get("/").await;
    assert!(
        root.contains("<base href=\"/b/main/\">"),
        "the root is the current board's page"
    );
    let id = s.ops.list(&TaskFilter::default()).unwrap()[0].id.clone();
    let (status, detail) = s.get(&format!("/b/ops/tasks/{id}")).await;
    assert_eq!(status, 200);
    assert!(
        detail.contains("<base href=\"/b/ops/\">") && detail.contains("Board: Ops"),
        "{detail}"
    );
    let (status, stats) = s.get("/b/ops/stats").await;
    assert!(
        status == 200 && stats.contains("<base href=\"/b/ops/\">"),
        "{stats}"
    );
    let (_, at_root) = s.get(&format!("/tasks/{id}")).await;
    assert!(
        !at_root.contains("on ops"),
        "the root is the current board's: {at_root}"
    );

    let r = s.client.get(format!("{}/b/ops/", s.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 308);
    assert_eq!(r.headers()["location"], "/b/ops");
    assert_eq!(s.get("/b/nope/api/tasks").await.0, 404);
    let bare = reqwest::Client::new();
    let r = bare
        .get(format!("{}/b/ops/api/tasks", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "every board is behind the token");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_board_alone_is_served_at_the_root_without_a_switcher() {
    let s = common::serve().await;
    s.task("alone");
    let page = s.text("/").await;
    assert!(
        page.contains("<base href=\"/\">") && !page.contains("class=\"boards\""),
        "{page}"
    );
    let (status, _) = s.get("/b/default/api/tasks").await;
    assert_eq!(status, 404);
}
