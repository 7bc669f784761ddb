//! A card's graph on its page: the cards around it and exactly the board's links among
//! them, children right of their parents, titles as text, and a bound on what is drawn.

mod common;

use std::collections::BTreeSet;

use board_core::{BoardStats, BoardWrites, NewTask, TaskId};

fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
    let start = tag
        .find(&format!("{name}=\""))
        .map(|i| i + name.len() + 2)
        .unwrap_or(0);
    tag[start..].split('"').next().unwrap_or_default()
}

/// A drawn card: its id, its class and its x.
type Node = (String, String, i64);

/// The drawn edges `(from, to)` and cards of a page's graph.
fn drawn(page: &str) -> (BTreeSet<(String, String)>, Vec<Node>) {
    let edges = page
        .split("<path class=\"edge\" ")
        .skip(1)
        .map(|tag| (attr(tag, "data-from").to_owned(), attr(tag, "data-to").to_owned()))
        .collect();
    let nodes = page
        .split("<g class=\"")
        .skip(1)
        .map(|tag| {
            let class = tag.split('"').next().unwrap_or_default().to_owned();
            let x = attr(&tag[tag.find("<rect").unwrap_or(0)..], "x")
                .parse()
                .unwrap_or(-1);
            (attr(tag, "data-id").to_owned(), class, x)
        })
        .collect();
    (edges, nodes)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cards_graph_is_the_boards_links_around_it() {
    let s = common::serve().await;
    let make = |title: &str| s.store.create(&NewTask::titled(title), common::NOW).unwrap().id;
    let (parent, root) = (make("the parent"), make("the goal"));
    let (b, c, d, e) = (make("step <b>"), make("step c"), make("join d"), make("after e"));
    let (grandparent, unrelated) = (make("the grandparent"), make("not related"));
    let links = [
        (&parent, &root),
        (&root, &b),
        (&root, &c),
        (&root, &d),
        (&b, &d),
        (&c, &d),
        (&d, &e),
    ];
    for (from, to) in links {
        s.store.link(from, to, common::NOW).unwrap();
    }
    s.store.link(&grandparent, &parent, common::NOW).unwrap();
    let page = s.text(&format!("/tasks/{root}")).await;
    let (edges, nodes) = drawn(&page);
    let ids: BTreeSet<&TaskId> = [&grandparent, &parent, &root, &b, &c, &d, &e]
        .into_iter()
        .collect();
    let board: BTreeSet<(String, String)> = s
        .store
        .snapshot()
        .unwrap()
        .links
        .iter()
        .filter(|l| ids.contains(&l.parent_id) && ids.contains(&l.child_id))
        .map(|l| (l.parent_id.to_string(), l.child_id.to_string()))
        .collect();
    assert_eq!(edges.len(), 8);
    assert_eq!(edges, board, "every link among the drawn cards, and no other");
    let drawn_ids: BTreeSet<String> = nodes.iter().map(|(id, _, _)| id.clone()).collect();
    let wanted: BTreeSet<String> = ids.iter().map(|id| id.to_string()).collect();
    assert_eq!(drawn_ids, wanted, "every linked card, near or far, and no other");
    assert!(!drawn_ids.contains(unrelated.as_str()));
    let x = |id: &TaskId| nodes.iter().find(|(n, _, _)| n == id.as_str()).unwrap().2;
    assert!(x(&grandparent) < x(&parent) && x(&parent) < x(&root) && x(&root) < x(&b) && x(&b) == x(&c));
    assert!(x(&d) > x(&b) && x(&e) > x(&d), "a child right of every parent");
    let class = |id: &TaskId| nodes.iter().find(|(n, _, _)| n == id.as_str()).unwrap().1.clone();
    assert_eq!(class(&root), "node s-todo root");
    assert_eq!(class(&parent), "node s-todo");
    assert!(
        page.contains("step &lt;b&gt;") && !page.contains("step <b>"),
        "titles are text"
    );

    let lone = s.task("no links");
    assert!(!s
        .text(&format!("/tasks/{}", lone.id))
        .await
        .contains("<svg class=\"dag\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wide_graph_draws_a_bounded_number_of_cards() {
    let s = common::serve().await;
    let root = s.task("fan out").id;
    for n in 0..50 {
        let child = s
            .store
            .create(&NewTask::titled(format!("child {n}")), common::NOW)
            .unwrap();
        s.store.link(&root, &child.id, common::NOW).unwrap();
    }
    let page = s.text(&format!("/tasks/{root}")).await;
    let (edges, nodes) = drawn(&page);
    assert_eq!((nodes.len(), edges.len()), (40, 39));
    assert!(page.contains("and 11 more not drawn"), "{page}");
}
