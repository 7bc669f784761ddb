//! A card's graph on its page (docs/web.md#pages): the cards linked to it, near or far
//! (a decomposed card's plan is its parents and theirs; its followers are its children),
//! drawn as SVG left to right, each card a link coloured by its status, each edge one of
//! the board's links. Read with two queries per card drawn, at most [`MAX_NODES`] of
//! them, nearest first; no script, no library.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;

use board_core::{BoardReads, StoreResult, Task, TaskId};

use crate::html::escape;

/// The most cards one graph draws; the rest are counted.
pub const MAX_NODES: usize = 40;

const NODE_W: i64 = 180;
const NODE_H: i64 = 36;
const GAP_X: i64 = 60;
const GAP_Y: i64 = 14;
const PAD: i64 = 8;
/// Characters of a title shown in a node.
const TITLE_CHARS: usize = 26;

/// The cards linked to one card and the links among them.
pub struct Graph {
    /// Each card with its layer: one past its deepest parent in the graph.
    nodes: Vec<(Task, i64)>,
    /// Parent and child, by index into `nodes`.
    edges: BTreeSet<(usize, usize)>,
    /// Cards reached but not drawn.
    left_out: BTreeSet<TaskId>,
}

impl Graph {
    /// Reads the graph of `root`: the cards linked to it either way, breadth first.
    pub fn read(store: &(impl BoardReads + ?Sized), root: &Task) -> StoreResult<Graph> {
        let mut graph = Graph {
            nodes: vec![(root.clone(), 0)],
            edges: BTreeSet::new(),
            left_out: BTreeSet::new(),
        };
        let mut index: BTreeMap<TaskId, usize> = BTreeMap::from([(root.id.clone(), 0)]);
        let mut queue = VecDeque::from([0usize]);
        while let Some(at) = queue.pop_front() {
            let id = graph.nodes[at].0.id.clone();
            let linked = store.parents(&id)?.into_iter().map(|t| (t, true));
            for (task, parent) in linked.chain(store.children(&id)?.into_iter().map(|t| (t, false))) {
                let known = index.get(&task.id).copied();
                let Some(other) = known.or_else(|| graph.add(&mut index, task)) else {
                    continue;
                };
                if known.is_none() {
                    queue.push_back(other);
                }
                graph.edges.insert(if parent { (other, at) } else { (at, other) });
            }
        }
        graph.settle_layers();
        Ok(graph)
    }

    fn add(&mut self, index: &mut BTreeMap<TaskId, usize>, task: Task) -> Option<usize> {
        if self.nodes.len() >= MAX_NODES {
            self.left_out.insert(task.id);
            return None;
        }
        index.insert(task.id.clone(), self.nodes.len());
        self.nodes.push((task, 0));
        Some(self.nodes.len() - 1)
    }

    /// Puts every card right of all its parents (the board's links never make a cycle,
    /// so this ends; the bound keeps a bad row from looping).
    fn settle_layers(&mut self) {
        for _ in 0..self.nodes.len() {
            let mut moved = false;
            for &(from, to) in &self.edges {
                if self.nodes[to].1 <= self.nodes[from].1 {
                    self.nodes[to].1 = self.nodes[from].1 + 1;
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// The graph as a page section; nothing for a card with no parent and no child.
    pub fn section(&self, out: &mut String) {
        if self.nodes.len() < 2 {
            return;
        }
        let first = self.nodes.iter().map(|(_, l)| *l).min().unwrap_or(0);
        let mut rows: BTreeMap<i64, i64> = BTreeMap::new();
        let place: Vec<(i64, i64)> = self
            .nodes
            .iter()
            .map(|(_, layer)| {
                let row = rows.entry(*layer).or_insert(0);
                *row += 1;
                let x = PAD + (layer - first) * (NODE_W + GAP_X);
                (x, PAD + (*row - 1) * (NODE_H + GAP_Y))
            })
            .collect();
        let width = place.iter().map(|(x, _)| x + NODE_W + PAD).max().unwrap_or(0);
        let height = place.iter().map(|(_, y)| y + NODE_H + PAD).max().unwrap_or(0);
        let _ = write!(
            out,
            "<section><h2>Graph</h2><div class=\"dag-scroll\"><svg class=\"dag\" role=\"group\" aria-label=\"the cards linked to this one\" \
             width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">"
        );
        for &(from, to) in &self.edges {
            let (fx, fy) = (place[from].0 + NODE_W, place[from].1 + NODE_H / 2);
            let (tx, ty) = (place[to].0, place[to].1 + NODE_H / 2);
            let bend = (tx - fx) / 2;
            let _ = write!(
                out,
                "<path class=\"edge\" data-from=\"{}\" data-to=\"{}\" d=\"M{fx} {fy} C{} {fy} {} {ty} {tx} {ty}\"/>",
                self.nodes[from].0.id,
                self.nodes[to].0.id,
                fx + bend,
                tx - bend
            );
        }
        for (at, ((task, _), (x, y))) in self.nodes.iter().zip(&place).enumerate() {
            let title: String = task.title.chars().take(TITLE_CHARS).collect();
            let more = if task.title.chars().count() > TITLE_CHARS {
                "…"
            } else {
                ""
            };
            let _ = write!(
                out,
                "<a href=\"tasks/{id}\"><g class=\"node s-{status}{root}\" data-id=\"{id}\"><title>{id} {status}: {full}</title>\
                 <rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"5\"/>\
                 <text x=\"{tx}\" y=\"{ty}\">{title}{more}</text><text class=\"sub\" x=\"{tx}\" y=\"{sy}\">{status}</text></g></a>",
                id = task.id,
                status = task.status,
                root = if at == 0 { " root" } else { "" },
                full = escape(&task.title),
                title = escape(&title),
                tx = x + 8,
                ty = y + 15,
                sy = y + 29,
            );
        }
        out.push_str("</svg></div>");
        if !self.left_out.is_empty() {
            let _ = write!(
                out,
                "<p class=\"meta\">and {} more not drawn</p>",
                self.left_out.len()
            );
        }
        out.push_str("</section>");
    }
}
