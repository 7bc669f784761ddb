//! Workload 8: the web board in headless Chromium (`crates/web/examples/bench_web.rs`
//! drives it over WebDriver, the browser tests' way): the first render of the 10k-task
//! board, a `kanban create` reaching the open page over the event stream, and the
//! server's memory with 100 open event streams.

use serde_json::Value;

use super::board::{boards, home_with_board};
use super::{example, path_str, Paths, Results, Row, RUNS};

fn samples(figures: &Value, key: &str) -> Result<Vec<f64>, String> {
    figures[key]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .ok_or_else(|| format!("bench_web printed no {key}"))
}

pub(super) fn web(paths: &Paths, results: &mut Results) -> Result<(), String> {
    boards(paths)?;
    let home = home_with_board(paths, 10_000, "web")?;
    let runs = RUNS.to_string();
    let figures = example(
        paths,
        "bench_web",
        &[
            "--kanban",
            path_str(&paths.kanban())?,
            "--home",
            path_str(&home)?,
            "--runs",
            &runs,
        ],
    )?;
    let cards = figures["cards"].as_u64().unwrap_or(0);
    let api = Row::new(
        "web.api_cards",
        "GET /api/cards, 10k board",
        "ms",
        samples(&figures, "api_cards_ms")?,
    );
    let render = Row::new(
        "web.first_render",
        "web first render, 10k board",
        "ms",
        samples(&figures, "first_render_ms")?,
    );
    let pass = render.median() < 300.0;
    let ratio = render.median() / api.median();
    results
        .rows
        .push(render.ratio(ratio, "GET /api/cards").goal("< 300 ms", pass));
    results.rows.push(api);
    let cli = Row::new(
        "web.cli_write",
        "kanban create (10k board)",
        "ms",
        samples(&figures, "cli_write_ms")?,
    );
    let visible = Row::new(
        "web.cli_to_page",
        "CLI write -> page (SSE), p50",
        "ms",
        samples(&figures, "cli_to_page_ms")?,
    );
    let pass = visible.median() < 200.0;
    let ratio = visible.median() / cli.median();
    results
        .rows
        .push(visible.ratio(ratio, "kanban create").goal("< 200 ms", pass));
    results.rows.push(cli);
    let idle = Row::new(
        "web.rss.idle",
        "serve RSS, idle",
        "MiB",
        samples(&figures, "rss_idle_mib")?,
    );
    let streams = Row::new(
        "web.rss.streams",
        "serve RSS, 100 event streams",
        "MiB",
        samples(&figures, "rss_streams_mib")?,
    );
    let ratio = streams.median() / idle.median();
    results.rows.push(idle);
    results.rows.push(streams.ratio(ratio, "serve RSS, idle"));
    results.note(format!(
        "web: the 10k board ({cards} cards drawn: every card but archived ones); render is navigation \
         start to the frame painting them, in headless Chromium"
    ));
    Ok(())
}
