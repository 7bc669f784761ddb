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

/// Presses `key` on the page, as a person would with nothing focused.
async fn press(browser: &Driver, key: &str) -> Result<(), String> {
    browser
        .script(
            "document.body.dispatchEvent(new KeyboardEvent('keydown', { key: arguments[0], bubbles: true })); return true;",
            json!([key]),
        )
        .await
        .map(drop)
}

/// A browser signed in to the board `s` serves (the first page opened with the token
/// sets the cookie the page's own requests carry), its event stream connected.
async fn signed_in(s: &common::Served) -> Result<Driver, String> {
    let browser = Driver::start().await?;
    browser
        .go(&format!("{}/?token={}", s.base, common::TOKEN))
        .await?;
    browser
        .until(
            "the stream connected",
            "return document.getElementById('live').textContent.includes('live')",
            json!([]),
        )
        .await?;
    Ok(browser)
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
    let browser = signed_in(&s).await?;
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
    press(&browser, "Escape").await?;
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
    press(&browser, "/").await?;
    browser
        .script("return document.activeElement.id;", json!([]))
        .await
        .and_then(|focused| {
            (focused == json!("filter-text"))
                .then_some(())
                .ok_or(format!("focus on {focused}"))
        })?;
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
    press(&browser, "?").await?;
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
    let browser = signed_in(&s).await?;
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
async fn the_board_a_card_its_drawer_and_stats_pass_axe_at_desktop_and_phone_width() -> Result<(), String> {
    let axe = axe_source()?;
    let s = common::serve().await;
    let goal = s.task("a goal <script>alert(1)</script>");
    let step = s.task("a step");
    s.store.link(&goal.id, &step.id, common::NOW).unwrap();
    s.store
        .block(&goal.id, None, Some("needs input".into()), None, common::NOW)
        .unwrap();
    let browser = signed_in(&s).await?;
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
        // The board with a card open in its drawer.
        browser.go(&format!("{}/?card={}", s.base, goal.id)).await?;
        browser
            .until(
                "the drawer",
                "return !!document.querySelector('#drawer article.detail') && document.querySelectorAll('.card').length === 2",
                json!([]),
            )
            .await?;
        for violation in serious_violations(&browser, &axe).await? {
            found.push(format!("drawer at {width} px: {violation}"));
        }
    }
    assert!(
        found.is_empty(),
        "serious or critical accessibility violations:\n{}",
        found.join("\n")
    );
    browser.quit().await
}

/// The time in the page's clock (Unix ms), which is this machine's.
fn epoch_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Clicks what `selector` names in the page.
async fn click(browser: &Driver, selector: &str) -> Result<(), String> {
    let clicked = browser
        .script(
            "const n = document.querySelector(arguments[0]); if (!n) return false; n.click(); return true;",
            json!([selector]),
        )
        .await?;
    (clicked == json!(true))
        .then_some(())
        .ok_or_else(|| format!("nothing to click at {selector}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cards_drawer_follows_its_worker_log_live_and_its_actions_change_the_board() -> Result<(), String> {
    let logs = tempfile::tempdir().map_err(|e| e.to_string())?;
    let s = common::serve_with(web::Settings {
        log: Some(common::logs_in(logs.path())),
        ..common::settings()
    })
    .await;
    let running = s.task("a running card <img src=x>");
    s.store.claim(&running.id, 900, common::NOW).unwrap();
    let log = logs.path().join(format!("{}.log", running.id));
    std::fs::write(&log, "started\n<script>window.owned = 1</script>\n").map_err(|e| e.to_string())?;
    let browser = signed_in(&s).await?;
    browser
        .until("the running card", IN_COLUMN, json!(["running", running.id]))
        .await?;
    click(&browser, &format!("#card-{} .title", running.id)).await?;
    let shown = browser
        .until(
            "the drawer's log",
            "const d = document.getElementById('drawer'); const pre = d.querySelector('pre.log');
             return !d.hidden && pre && pre.textContent.includes('started') && pre.textContent;",
            json!([]),
        )
        .await?;
    assert_eq!(
        shown,
        json!("started\n<script>window.owned = 1</script>\n"),
        "log text as text"
    );
    assert_eq!(
        browser.script("return location.search", json!([])).await?,
        json!(format!("?card={}", running.id)),
        "the open card is in the address"
    );
    let title = browser
        .script(
            "return document.querySelector('#drawer h1').textContent",
            json!([]),
        )
        .await?;
    assert_eq!(title, json!(format!("{} a running card <img src=x>", running.id)));

    // A line the worker prints reaches the open drawer within a second.
    browser
        .script(
            "const pre = document.querySelector('#drawer pre.log');
             new MutationObserver(() => {
               if (!window.lineSeen && pre.textContent.includes('step two')) window.lineSeen = Date.now();
             }).observe(pre, { childList: true, characterData: true, subtree: true });
             return true;",
            json!([]),
        )
        .await?;
    let wrote = epoch_ms();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut file, b"step two \x1b[31m<b>bold</b>\n").map_err(|e| e.to_string())?;
    let seen = browser
        .until("the new line", "return window.lineSeen || null", json!([]))
        .await?;
    let took = seen.as_f64().unwrap_or(f64::MAX) - wrote;
    assert!(took < 1000.0, "the line took {took} ms to show");
    let text = browser
        .script(
            "return document.querySelector('#drawer pre.log').textContent",
            json!([]),
        )
        .await?;
    assert!(
        text.as_str()
            .unwrap_or_default()
            .ends_with("step two  [31m<b>bold</b>\n"),
        "{text}"
    );
    assert_eq!(
        browser
            .script("return [window.owned === undefined, document.querySelectorAll('#drawer b, #drawer script, #drawer img').length]", json!([]))
            .await?,
        json!([true, 0]),
        "nothing of the card or its log became markup"
    );
    save_screenshot(&browser, "drawer-desktop.png").await?;

    // A comment from the drawer lands on the board, and the drawer shows it as text.
    const HOSTILE: &str = "a comment <img src=x onerror=\"window.owned=2\"><script>window.owned=3</script>";
    act(&browser, "comment", json!({ "body": HOSTILE })).await?;
    browser
        .until(
            "the comment in the drawer",
            "const c = document.querySelector('#drawer .comment'); return !!c && c.innerText.includes(arguments[0])",
            json!([HOSTILE]),
        )
        .await?;
    assert_eq!(
        browser
            .script("return [window.owned === undefined, document.querySelectorAll('#drawer img, #drawer script').length]", json!([]))
            .await?,
        json!([true, 0]),
        "the comment stayed text"
    );
    let comments = s.store.comments(&running.id).unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, HOSTILE);
    // Another writer finishes the card: the drawer follows without a reload.
    let other = SqliteStore::open(s.store_path(), &Options::default()).unwrap();
    other
        .block(&running.id, None, Some("needs a key".into()), None, common::NOW)
        .unwrap();
    browser
        .until(
            "the drawer showing the card blocked",
            "const a = document.querySelector('#drawer article'); return a && a.dataset.status === 'blocked' && a.innerText.includes('needs a key')",
            json!([]),
        )
        .await?;
    // Unblock from the drawer: the card moves on the board.
    click(&browser, "#drawer form[data-action=unblock] button").await?;
    browser
        .until(
            "the card unblocked on the board",
            IN_COLUMN,
            json!(["ready", running.id]),
        )
        .await?;

    // The address opens the same drawer after a reload; Escape closes it.
    browser.go(&format!("{}/?card={}", s.base, running.id)).await?;
    browser
        .until(
            "the drawer from the address",
            "const d = document.getElementById('drawer'); return !d.hidden && !!d.querySelector('article.detail')",
            json!([]),
        )
        .await?;
    browser.window_size(390, 844).await?;
    save_screenshot(&browser, "drawer-phone.png").await?;
    browser.window_size(1280, 900).await?;
    press(&browser, "Escape").await?;
    browser
        .until(
            "the drawer closed",
            "return document.getElementById('drawer').hidden && location.search === ''",
            json!([]),
        )
        .await?;
    // j moves to the first card, Enter (a click on its title) opens it.
    press(&browser, "j").await?;
    browser
        .script(
            "return document.activeElement.closest('.card').dataset.id;",
            json!([]),
        )
        .await
        .and_then(|id| {
            (id == json!(running.id.as_str()))
                .then_some(())
                .ok_or(format!("focus on {id}"))
        })?;
    browser
        .script("document.activeElement.click(); return true;", json!([]))
        .await?;
    browser
        .until(
            "the drawer opened from the keyboard",
            "return !document.getElementById('drawer').hidden",
            json!([]),
        )
        .await?;
    browser.quit().await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lanes_strip_shows_each_lane_and_filters_to_the_cards_it_holds() -> Result<(), String> {
    use board_core::lanes::{Lane, LaneClaim};
    use board_core::{Checks, LaneDesk};
    let s = common::serve().await;
    let now = common::clock();
    for (name, token) in [("laptop", "1"), ("ci", "2")] {
        let lane = Lane::new(
            name,
            &["ext".to_owned()],
            &format!("kl_{}", token.repeat(64)),
            now,
        )
        .unwrap();
        s.store.create_lane(&lane).unwrap();
    }
    let ext = |title: &str| NewTask {
        assignee: Some("ext".into()),
        ..NewTask::titled(title)
    };
    let held = s.store.create(&ext("held by the laptop"), now).unwrap();
    let other = s.task("the gateway's");
    match s
        .store
        .claim_for_lane("laptop", 600, 4, &|_| Checks::default(), now)
        .unwrap()
    {
        LaneClaim::Claimed(c) => assert_eq!(c.task.id, held.id),
        LaneClaim::Nothing => return Err("the lane claimed nothing".into()),
    }
    let browser = signed_in(&s).await?;
    let strip = browser
        .until(
            "the lanes",
            "const s = document.getElementById('lane-strip'); return !s.hidden && s.querySelectorAll('.lane').length === 2 && s.innerText",
            json!([]),
        )
        .await?;
    let strip = strip.as_str().unwrap_or_default();
    assert!(strip.contains("laptop · holding 1 · 0 done"), "{strip}");
    assert!(strip.contains("ci · idle · 0 done"), "{strip}");
    browser
        .until("both cards", IN_COLUMN, json!(["ready", other.id]))
        .await?;
    click(&browser, "#lane-strip .lane[data-lane=laptop]").await?;
    let shown = browser
        .until(
            "only the laptop's card",
            "const ids = [...document.querySelectorAll('#board .card')].map((c) => c.dataset.id); return ids.length === 1 && ids[0]",
            json!([]),
        )
        .await?;
    assert_eq!(shown, json!(held.id.as_str()));
    assert_eq!(
        browser.script("return location.search", json!([])).await?,
        json!("?lane=laptop")
    );
    // The address keeps the view: a reload shows the laptop's cards alone.
    browser.go(&format!("{}/?lane=laptop", s.base)).await?;
    browser
        .until(
            "the lane's view from the address",
            "const ids = [...document.querySelectorAll('#board .card')].map((c) => c.dataset.id);
             const pressed = document.querySelector('#lane-strip .lane[aria-pressed=true]');
             return ids.length === 1 && ids[0] === arguments[0] && pressed && pressed.dataset.lane === 'laptop'",
            json!([held.id]),
        )
        .await?;
    // The lane finishing its task shows on the strip without a reload.
    let run = s.store.runs(&held.id).unwrap().pop().map(|r| r.id);
    let other_writer = SqliteStore::open(s.store_path(), &Options::default()).unwrap();
    let done = Completion {
        expected_run_id: run,
        ..Completion::default()
    };
    assert!(other_writer.complete(&held.id, &done, common::clock()).unwrap());
    browser
        .until(
            "the strip updated",
            "return document.getElementById('lane-strip').innerText.includes('laptop · idle · 1 done')",
            json!([]),
        )
        .await?;
    browser.quit().await
}

/// Opens `id` in the board's drawer and waits for its article.
async fn open_card(browser: &Driver, id: &board_core::TaskId) -> Result<(), String> {
    click(browser, &format!("#card-{id} .title")).await?;
    browser
        .until(
            "the card in the drawer",
            "const a = document.querySelector('#drawer article.detail'); return !!a && a.dataset.id === arguments[0]",
            json!([id]),
        )
        .await
        .map(drop)
}

/// Fills the drawer's `action` form with `fields` and sends it.
async fn act(browser: &Driver, action: &str, fields: serde_json::Value) -> Result<(), String> {
    let sent = browser
        .script(
            "const f = document.querySelector('#drawer form[data-action=' + arguments[0] + ']');
             if (!f) return false;
             for (const [name, value] of Object.entries(arguments[1])) f[name].value = value;
             f.requestSubmit();
             return true;",
            json!([action, fields]),
        )
        .await?;
    (sent == json!(true))
        .then_some(())
        .ok_or_else(|| format!("the drawer offers no {action}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_action_of_a_cards_drawer_changes_the_board_and_the_page_follows() -> Result<(), String> {
    use board_core::Status;
    let fake = fake_llm::FakeLlm::start(fake_llm::Settings::default())
        .await
        .map_err(|e| e.to_string())?;
    let s = common::serve_with_model(&fake, "sk-browser-0123456789").await;
    let ready = s.task("to assign, retitle and archive");
    let running = s.task("to reclaim");
    s.store.claim(&running.id, 900, common::NOW).unwrap();
    let approved = s.task("to approve");
    common::into_review(&s, &approved.id, json!("tests pass"));
    let changed = s.task("to send back");
    common::into_review(&s, &changed.id, json!("tests pass"));
    let blocked = s.task("to unblock");
    s.store
        .block(&blocked.id, None, Some("waits".into()), None, common::NOW)
        .unwrap();
    let triage = s
        .store
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("a rough idea")
            },
            common::NOW,
        )
        .unwrap();
    let browser = signed_in(&s).await?;
    let on_card = "const c = document.querySelector('#card-' + arguments[0]); return !!c && c.innerText.includes(arguments[1])";

    open_card(&browser, &ready.id).await?;
    act(&browser, "assign", json!({ "assignee": "writer" })).await?;
    browser
        .until("the assignee on the card", on_card, json!([ready.id, "writer"]))
        .await?;
    assert_eq!(
        s.store.get(&ready.id).unwrap().assignee.as_deref(),
        Some("writer")
    );
    act(&browser, "edit", json!({ "title": "retitled in the drawer" })).await?;
    browser
        .until(
            "the new title on the card",
            on_card,
            json!([ready.id, "retitled in the drawer"]),
        )
        .await?;
    browser
        .until(
            "the new title in the drawer",
            "return document.querySelector('#drawer h1').textContent.includes('retitled in the drawer')",
            json!([]),
        )
        .await?;
    act(&browser, "archive", json!({})).await?;
    browser
        .until(
            "the card off the board",
            "return !document.querySelector('#card-' + arguments[0])",
            json!([ready.id]),
        )
        .await?;
    assert_eq!(s.store.get(&ready.id).unwrap().status, Status::Archived);

    for (card, action, fields, column) in [
        (&running, "reclaim", json!({}), "ready"),
        (&approved, "approve", json!({}), "done"),
        (
            &changed,
            "request-changes",
            json!({ "reason": "add a test" }),
            "ready",
        ),
        (&blocked, "unblock", json!({}), "ready"),
    ] {
        open_card(&browser, &card.id).await?;
        act(&browser, action, fields).await?;
        browser
            .until(
                &format!("{action} moving the card"),
                IN_COLUMN,
                json!([column, card.id]),
            )
            .await?;
        browser
            .until(
                "the drawer following",
                "const a = document.querySelector('#drawer article.detail'); return !!a && a.dataset.status === arguments[0]",
                json!([column]),
            )
            .await?;
        assert_eq!(s.store.get(&card.id).unwrap().status.as_str(), column, "{action}");
    }
    let comments = s.store.comments(&changed.id).unwrap();
    assert!(
        comments.iter().any(|c| c.body.contains("add a test")),
        "{comments:?}"
    );

    // Decompose asks the model; the plan's cards appear on the board.
    fake.push_reply(fake_llm::Reply::text(
        r#"{"fanout": true, "rationale": "two parts", "tasks": [
            {"title": "first part <i>", "body": "a", "parents": []},
            {"title": "second part", "body": "b", "parents": [0]}]}"#,
    ));
    open_card(&browser, &triage.id).await?;
    act(&browser, "decompose", json!({})).await?;
    browser
        .until(
            "the plan's cards on the board",
            "const t = document.getElementById('board').innerText; return t.includes('first part <i>') && t.includes('second part')",
            json!([]),
        )
        .await?;
    assert_ne!(s.store.get(&triage.id).unwrap().status, Status::Triage);
    assert_eq!(fake.requests().len(), 1);
    browser.quit().await
}
