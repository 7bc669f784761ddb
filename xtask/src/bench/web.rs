//! Workload 8: the web board in headless Chromium (`crates/web/examples/bench_web.rs`
//! drives it over WebDriver, the browser tests' way): the first render of the 10k-task
//! board in a browser started for each render and the page's weight, a `kanban create`
//! reaching the open page over the event stream, a card's drawer opening, and the
//! server's memory with 100 open event streams.

use serde_json::Value;

use super::board::{boards, home_with_board};
use super::{median, served_example, Paths, Results, Row, RUNS};

fn samples(figures: &Value, key: &str) -> Result<Vec<f64>, String> {
    figures[key]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .ok_or_else(|| format!("bench_web printed no {key}"))
}

pub(super) fn web(paths: &Paths, results: &mut Results) -> Result<(), String> {
    boards(paths)?;
    let home = home_with_board(paths, 10_000, "web")?;
    let figures = served_example(paths, "bench_web", &home, RUNS)?;
    first_render(&figures, results)?;
    weight(&figures, results)?;
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
    let pass = visible.median() < 100.0;
    let ratio = visible.median() / cli.median();
    results
        .rows
        .push(visible.ratio(ratio, "kanban create").goal("< 100 ms", pass));
    results.rows.push(cli);
    drawer(&figures, results)?;
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
    Ok(())
}

/// The drawer's rows: a click on a card's title to the drawer painted with its article,
/// against the server's answer alone for the same cards.
fn drawer(figures: &Value, results: &mut Results) -> Result<(), String> {
    let open = Row::new(
        "web.drawer_open",
        "card drawer: click -> painted",
        "ms",
        samples(figures, "drawer_open_ms")?,
    );
    let read = Row::new(
        "web.drawer_read",
        "GET /tasks/ID/drawer",
        "ms",
        samples(figures, "drawer_read_ms")?,
    );
    let ratio = open.median() / read.median();
    let pass = open.median() < 100.0;
    results
        .rows
        .push(open.ratio(ratio, "its GET").goal("< 100 ms", pass));
    results.rows.push(read);
    Ok(())
}

/// The page's weight: its HTML, scripts, styles and icon as the browser read them (we
/// serve them uncompressed), and the cards' data it read beside them.
fn weight(figures: &Value, results: &mut Results) -> Result<(), String> {
    let files = figures["weight"]
        .as_array()
        .ok_or("bench_web printed no page weight")?;
    let mut total = 0.0;
    let mut parts = Vec::new();
    for file in files {
        let (path, bytes) = (file[0].as_str().unwrap_or("?"), file[1].as_f64().unwrap_or(0.0));
        total += bytes;
        parts.push(format!("{path} {:.1} KiB", bytes / 1024.0));
    }
    let data = figures["data_bytes"].as_f64().unwrap_or(0.0);
    let row = Row::new(
        "web.page_weight",
        "board page weight (no cards)",
        "KiB",
        vec![total / 1024.0],
    );
    let pass = row.median() < 64.0;
    results.rows.push(row.goal("< 64 KiB", pass));
    results.note(format!(
        "web: the board page weighs {:.1} KiB uncompressed ({}); its first read of the 10k \
         board's columns was {:.0} KiB of cards",
        total / 1024.0,
        parts.join(", "),
        data / 1024.0
    ));
    Ok(())
}

/// The first render's rows: the render, against the page's own API reads, and a note of
/// what the page showed.
fn first_render(figures: &Value, results: &mut Results) -> Result<(), String> {
    let cards = figures["cards"]
        .as_u64()
        .ok_or("bench_web printed no card count")?;
    let columns = figures["columns"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| Some(format!("{} {}", c[0].as_str()?, c[1].as_str()?)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .ok_or("bench_web printed no column counts")?;
    let api = Row::new(
        "web.api_columns",
        "GET /api/columns (the page's read)",
        "ms",
        samples(figures, "api_columns_ms")?,
    );
    let render = Row::new(
        "web.first_render",
        &format!("web first render, 10k, {cards} cards"),
        "ms",
        samples(figures, "first_render_ms")?,
    );
    let phase = |key: &str| samples(figures, key).map(|s| super::show(median(&s)));
    let (loaded, reads) = (phase("dom_content_loaded_ms")?, phase("page_reads_start_ms")?);
    let (read, dom) = (phase("page_reads_end_ms")?, phase("first_render_dom_ms")?);
    let pass = render.median() < 300.0;
    let ratio = render.median() / api.median();
    results
        .rows
        .push(render.ratio(ratio, "the page's API read").goal("< 300 ms", pass));
    results.rows.push(api);
    results.note(format!(
        "web: first render of the 10k board in a browser started for each render (empty profile): \
         navigation start to the end of the first frame after the DOM held all {cards} cards of the \
         columns' first pages; medians from navigation start: DOMContentLoaded {loaded} ms, the \
         page's read of its columns {reads} to {read} ms, every card in the DOM {dom} ms; the page showed \
         {columns}"
    ));
    Ok(())
}
