//! The board in headless Chromium, driven over WebDriver (chromedriver's HTTP endpoint):
//! the cards show, a card created in the page lands in triage, a completion written by
//! another process moves a running card to done without a reload, a refused drag shows
//! its message, and screenshots of the board and a card's detail land in `target/web/`.
//!
//! Needs Debian's `chromium` and `chromium-driver`; without them this test fails and
//! says so.

mod common;
mod webdriver;

use std::path::{Path, PathBuf};

use board_core::{BoardReads, BoardWrites, Completion, NewTask};
use board_sqlite::{Options, SqliteStore};
use serde_json::json;
use webdriver::Driver;

async fn save_screenshot(browser: &Driver, name: &str) -> Result<(), String> {
    let bytes = browser.screenshot().await?;
    let dir = target_dir().join("web");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(name), bytes).map_err(|e| e.to_string())
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

const IN_COLUMN: &str =
    "const c = document.querySelector('#col-' + arguments[0] + ' #card-' + arguments[1]); return !!c;";

#[tokio::test(flavor = "multi_thread")]
async fn the_board_in_a_real_browser() -> Result<(), String> {
    let s = common::serve().await;
    let seeded = s
        .store
        .create(
            &NewTask {
                body: "# Plan\n\n- one\n- two".into(),
                ..NewTask::titled("seeded card")
            },
            common::NOW,
        )
        .unwrap();
    let running = s.task("running card");
    let claim = s.store.claim(&running.id, 900, common::NOW).unwrap();
    let browser = Driver::start().await?;

    // The first page opened with the token sets the cookie the page's own requests carry.
    browser
        .go(&format!("{}/?token={}", s.base, common::TOKEN))
        .await?;
    browser
        .until("the seeded card in ready", IN_COLUMN, json!(["ready", seeded.id]))
        .await?;
    browser
        .until(
            "the running card in running",
            IN_COLUMN,
            json!(["running", running.id]),
        )
        .await?;
    browser
        .until(
            "the stream connected",
            "return document.getElementById('live').textContent.includes('live')",
            json!([]),
        )
        .await?;

    // A card created in the page lands in triage.
    browser.script(
        "const f = document.getElementById('create'); f.title.value = arguments[0]; f.into.value = 'triage'; f.requestSubmit();",
        json!(["made in the page"]),
    ).await?;
    browser
        .until(
            "the new card in triage",
            "return document.querySelector('#col-triage').innerText.includes(arguments[0])",
            json!(["made in the page"]),
        )
        .await?;

    // Another writer (as `kanban complete` from a shell) finishes the running card.
    let other = SqliteStore::open(s.store_path(), &Options::default()).unwrap();
    let completion = Completion {
        expected_run_id: Some(claim.run_id),
        result: Some("ok".into()),
        ..Completion::default()
    };
    assert!(other.complete(&running.id, &completion, common::NOW).unwrap());
    browser
        .until(
            "the completed card in done without a reload",
            IN_COLUMN,
            json!(["done", running.id]),
        )
        .await?;

    // A drag the board refuses shows why.
    browser.script(
        "const dt = new DataTransfer(); dt.setData('text/plain', arguments[0]);
         document.getElementById('col-done').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));",
        json!([seeded.id]),
    ).await?;
    let message = browser.until(
        "the refusal shown",
        "const m = document.getElementById('message'); return m.classList.contains('bad') && m.textContent;",
        json!([]),
    ).await?;
    assert!(
        message
            .as_str()
            .unwrap()
            .contains("no action moves a card from ready to done"),
        "{message}"
    );
    save_screenshot(&browser, "board.png").await?;

    browser.go(&format!("{}/tasks/{}", s.base, seeded.id)).await?;
    browser
        .until(
            "the rendered body",
            "return !!document.querySelector('.markdown h1')",
            json!([]),
        )
        .await?;
    save_screenshot(&browser, "detail.png").await?;
    browser.quit().await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_board_switcher_in_a_real_browser() -> Result<(), String> {
    let (base, main, ops) = common::serve_two_boards().await;
    let browser = Driver::start().await?;
    browser
        .go(&format!("{base}/b/ops?token={}", common::TOKEN))
        .await?;
    let shows = "return document.getElementById('board').innerText.includes(arguments[0])";
    browser
        .until("the ops board's card", shows, json!(["on ops"]))
        .await?;
    browser
        .until(
            "the stream connected under the board's path",
            "return document.getElementById('live').textContent.includes('live')",
            json!([]),
        )
        .await?;
    // A card written to ops from elsewhere shows without a reload; main's never does.
    ops.create(&NewTask::titled("later on ops"), common::NOW).unwrap();
    main.create(&NewTask::titled("later on main"), common::NOW)
        .unwrap();
    browser
        .until("the new ops card", shows, json!(["later on ops"]))
        .await?;
    let mixed = browser.script(shows, json!(["on main"])).await?;
    assert_eq!(mixed, json!(false), "main's cards are not on ops' page");
    save_screenshot(&browser, "boards.png").await?;
    // The switcher goes to main's page.
    browser
        .script(
            "document.querySelector('.boards a[href=\"/b/main\"]').click(); return true;",
            json!([]),
        )
        .await?;
    browser
        .until("main's card after switching", shows, json!(["later on main"]))
        .await?;
    let url = browser.script("return location.pathname", json!([])).await?;
    assert_eq!(url, json!("/b/main"));
    browser.quit().await
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_live_in_the_address_and_keys_drive_the_board() -> Result<(), String> {
    let s = common::serve().await;
    for (title, assignee) in [("alpha one", "coder"), ("alpha two", "writer"), ("beta", "coder")] {
        let task = NewTask {
            assignee: Some(assignee.into()),
            ..NewTask::titled(title)
        };
        s.store.create(&task, common::NOW).unwrap();
    }
    let browser = Driver::start().await?;
    browser
        .go(&format!(
            "{}/?token={}&q=alpha&assignee=coder",
            s.base,
            common::TOKEN
        ))
        .await?;
    let shown =
        "return [...document.querySelectorAll('.card .title')].map((n) => n.textContent).sort().join('|')";
    let titles = browser
        .until(
            "the shared view",
            &format!("const t = (() => {{ {shown} }})(); return t === 'alpha one' && t"),
            json!([]),
        )
        .await?;
    assert_eq!(titles, json!("alpha one"));
    let address = browser.script("return location.search", json!([])).await?;
    assert_eq!(
        address,
        json!("?q=alpha&assignee=coder"),
        "the token leaves the address"
    );
    let inputs = browser
        .script("return [document.getElementById('filter-text').value, document.getElementById('filter-assignee').value]", json!([]))
        .await?;
    assert_eq!(inputs, json!(["alpha", "coder"]));

    // Escape clears the filters, and the address follows.
    browser
        .script("document.body.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true })); return true;", json!([]))
        .await?;
    browser
        .until(
            "every card again",
            &format!("return (() => {{ {shown} }})() === 'alpha one|alpha two|beta'"),
            json!([]),
        )
        .await?;
    assert_eq!(
        browser.script("return location.search", json!([])).await?,
        json!("")
    );
    // `/` focuses the filter; typing there filters and is written to the address.
    browser
        .script("document.body.dispatchEvent(new KeyboardEvent('keydown', { key: '/', bubbles: true })); return document.activeElement.id;", json!([]))
        .await
        .and_then(|focused| (focused == json!("filter-text")).then_some(()).ok_or(format!("focus on {focused}")))?;
    browser
        .script("const f = document.getElementById('filter-text'); f.value = 'beta'; f.dispatchEvent(new Event('input')); return true;", json!([]))
        .await?;
    browser
        .until(
            "the typed filter in the address",
            "return location.search === '?q=beta'",
            json!([]),
        )
        .await?;
    // `?` lists the keys.
    browser
        .script("document.body.dispatchEvent(new KeyboardEvent('keydown', { key: '?', bubbles: true })); return true;", json!([]))
        .await?;
    let help = browser
        .until(
            "the keys listed",
            "const k = document.getElementById('keys'); return k && !k.hidden && k.innerText",
            json!([]),
        )
        .await?;
    assert!(
        help.as_str().unwrap_or_default().contains("filter by text"),
        "{help}"
    );
    save_screenshot(&browser, "keys.png").await?;
    browser.quit().await
}

#[tokio::test(flavor = "multi_thread")]
async fn bulk_actions_archive_fifty_cards_with_one_confirmation() -> Result<(), String> {
    let s = common::serve().await;
    let ids: Vec<String> = (0..50)
        .map(|n| s.task(&format!("bulk {n}")).id.to_string())
        .collect();
    let browser = Driver::start().await?;
    browser
        .go(&format!("{}/?token={}", s.base, common::TOKEN))
        .await?;
    browser
        .until(
            "fifty ready cards",
            "return document.querySelectorAll('#col-ready .card').length === 50",
            json!([]),
        )
        .await?;
    browser
        .script(
            "for (const p of document.querySelectorAll('#col-ready .pick')) p.click(); return true;",
            json!([]),
        )
        .await?;
    let bar = browser
        .until(
            "the bulk bar",
            "const b = document.getElementById('bulk'); return !b.hidden && b.innerText",
            json!([]),
        )
        .await?;
    assert!(bar.as_str().unwrap_or_default().contains("50 selected"), "{bar}");
    browser
        .script(
            "document.querySelector('#bulk [data-bulk=archive]').click(); return true;",
            json!([]),
        )
        .await?;
    let asked = browser
        .until("one confirmation", "const b = document.getElementById('bulk'); return b.innerText.includes('Archive 50 cards?') && b.innerText", json!([]))
        .await?;
    assert!(asked.as_str().is_some());
    save_screenshot(&browser, "bulk.png").await?;
    browser
        .script(
            "document.getElementById('bulk-confirm').click(); return true;",
            json!([]),
        )
        .await?;
    browser
        .until(
            "the column emptied",
            "return document.querySelectorAll('#col-ready .card').length === 0",
            json!([]),
        )
        .await?;
    let message = browser
        .script("return document.getElementById('message').textContent", json!([]))
        .await?;
    assert_eq!(message, json!("archive: 50 done"));
    let archived = ids
        .iter()
        .filter(|id| s.store.get(&id.parse().unwrap()).unwrap().status == board_core::Status::Archived)
        .count();
    assert_eq!(archived, 50);
    browser.quit().await
}

/// axe-core (npm), fetched beside the venv by `cargo xtask venv` (`target/axe-core`).
fn axe_source() -> Result<String, String> {
    let path = target_dir().join("axe-core").join("axe.min.js");
    std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}; `cargo xtask venv` fetches axe-core", path.display()))
}

/// axe-core's serious and critical violations on the page the browser shows, one line each.
async fn serious_violations(browser: &Driver, axe: &str) -> Result<Vec<String>, String> {
    // The source runs as the driver's own script, which the page's policy does not govern.
    let loaded = browser
        .script(&format!("{axe}\nreturn typeof window.axe;"), json!([]))
        .await?;
    if loaded != json!("object") {
        return Err(format!("axe-core did not load: {loaded}"));
    }
    let found = browser
        .script(
            "return axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations);",
            json!([]),
        )
        .await?;
    Ok(found
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .map(|v| {
            let targets: Vec<String> = v["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .take(3)
                .map(|n| n["target"].to_string())
                .collect();
            format!("{} ({}): {}", v["id"], v["impact"], targets.join(", "))
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_board_a_card_and_stats_pass_axe_at_desktop_and_phone_width() -> Result<(), String> {
    let axe = axe_source()?;
    let s = common::serve().await;
    let goal = s.task("a goal <script>alert(1)</script>");
    let step = s.task("a step");
    s.store.link(&goal.id, &step.id, common::NOW).unwrap();
    s.store
        .block(&goal.id, None, Some("needs input".into()), None, common::NOW)
        .unwrap();
    let browser = Driver::start().await?;
    browser
        .go(&format!("{}/?token={}", s.base, common::TOKEN))
        .await?;
    let mut found = Vec::new();
    for (width, height, suffix) in [(1280, 900, "desktop"), (390, 844, "phone")] {
        browser.window_size(width, height).await?;
        for (path, name) in [
            ("/".to_owned(), "board"),
            (format!("/tasks/{}", goal.id), "card"),
            ("/stats".to_owned(), "stats"),
        ] {
            browser.go(&format!("{}{path}", s.base)).await?;
            browser
                .until(
                    "the page drawn",
                    "return document.readyState === 'complete' && !!document.querySelector('main')",
                    json!([]),
                )
                .await?;
            if name == "board" {
                browser
                    .until(
                        "the cards",
                        "return document.querySelectorAll('.card').length === 2",
                        json!([]),
                    )
                    .await?;
            }
            save_screenshot(&browser, &format!("{name}-{suffix}.png")).await?;
            for violation in serious_violations(&browser, &axe).await? {
                found.push(format!("{name} at {width} px: {violation}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "serious or critical accessibility violations:\n{}",
        found.join("\n")
    );
    browser.quit().await
}
