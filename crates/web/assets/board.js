// The board page: draws the columns from /api/cards, a page of each column (a "more"
// button loads the next), then keeps them live from the event stream: each event names
// a task, whose card is read again and put in its column.
// A card opens in a drawer beside the board: its page's article, read from the server
// (which escapes every piece of card text), its log followed live (detail.js).
// Card text is untrusted: it only ever reaches the page through textContent.
"use strict";

const STATUSES = ["triage", "todo", "ready", "running", "verifying", "review", "blocked", "scheduled", "done", "archived"];
const cards = new Map();
// Per column: the cursor of its next page (null when all are loaded), and its total.
const nextPage = new Map();
const totals = new Map();
const PAGE = 200;
let serverSkew = 0;

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function age(then) {
  const s = Math.max(0, Math.floor(Date.now() / 1000 + serverSkew - then));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}

function say(text, bad) {
  const m = $("message");
  m.textContent = text;
  m.className = bad ? "message bad" : "message";
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function drawColumns() {
  const board = $("board");
  board.textContent = "";
  for (const status of STATUSES) {
    const column = el("section", "column");
    column.dataset.status = status;
    column.id = "col-" + status;
    const head = el("h2", "", status);
    head.append(el("span", "count", "0"));
    const more = el("button", "more", "more");
    more.type = "button";
    more.hidden = true;
    more.addEventListener("click", async () => {
      try {
        await loadColumn(status);
        render();
      } catch (e) {
        say(e.message, true);
      }
    });
    column.append(head, el("div", "cards"), more);
    column.addEventListener("dragover", (e) => { e.preventDefault(); column.classList.add("over"); });
    column.addEventListener("dragleave", () => column.classList.remove("over"));
    column.addEventListener("drop", (e) => {
      e.preventDefault();
      column.classList.remove("over");
      const id = e.dataTransfer.getData("text/plain");
      if (id) move(id, status);
    });
    board.append(column);
  }
}

async function move(id, to) {
  const card = cards.get(id);
  if (!card || card.task.status === to) return;
  try {
    await api("api/tasks/" + encodeURIComponent(id) + "/move", { to });
    say("moved " + id + " to " + to);
    await refresh(id);
  } catch (e) {
    say(e.message, true);
  }
}

function cardNode(c) {
  const t = c.task;
  const node = el("article", "card");
  node.id = "card-" + t.id;
  node.dataset.id = t.id;
  node.draggable = true;
  const title = el("a", "title", t.title);
  title.href = "tasks/" + encodeURIComponent(t.id);
  const meta = el("p", "meta");
  meta.append(el("span", "id", t.id), el("span", "assignee", t.assignee || "unassigned"),
    el("span", "age", age(t.created_at)));
  if (c.runs > 0) meta.append(el("span", "runs", c.runs + (c.runs === 1 ? " run" : " runs")));
  if (t.consecutive_failures > 0) meta.append(el("span", "mark failures", t.consecutive_failures + " failed"));
  if (c.parked) meta.append(el("span", "mark parked", "parked"));
  if (c.cooling) meta.append(el("span", "mark cooling", "cooling"));
  if (c.lane) meta.append(el("span", "mark lane", "lane " + c.lane));
  if (c.unrunnable) meta.append(el("span", "mark unrunnable", "waits: no command for " + c.unrunnable));
  if (c.stale_lease) meta.append(el("span", "mark stale", "stale lease"));
  const pick = el("input", "pick");
  pick.type = "checkbox";
  pick.checked = selected.has(t.id);
  pick.setAttribute("aria-label", "select " + t.id);
  node.append(pick, title, meta);
  return node;
}

// The cards selected for a bulk action, by id; a card that leaves the board leaves it.
const selected = new Set();

// What each bulk action asks for before its one confirmation.
const BULK = {
  archive: { label: "Archive" },
  assign: { label: "Assign", input: "assignee", placeholder: "profile (empty clears)" },
  block: { label: "Block", input: "reason", placeholder: "reason" },
  unblock: { label: "Unblock" },
  promote: { label: "Promote", input: "reason", placeholder: "reason (optional)" },
};

// The bar of bulk actions, shown while cards are selected.
function bulkBar() {
  for (const id of [...selected]) if (!cards.has(id)) selected.delete(id);
  const bar = $("bulk");
  bar.replaceChildren();
  bar.hidden = selected.size === 0;
  if (bar.hidden) return;
  bar.append(el("span", "count", selected.size + " selected"));
  for (const [action, spec] of Object.entries(BULK)) {
    const button = el("button", null, spec.label);
    button.type = "button";
    button.dataset.bulk = action;
    button.addEventListener("click", () => confirmBulk(action, spec));
    bar.append(button);
  }
  const clear = el("button", null, "Clear");
  clear.type = "button";
  clear.addEventListener("click", () => { selected.clear(); render(); bulkBar(); });
  bar.append(clear);
}

// One confirmation for the whole selection, then one request.
function confirmBulk(action, spec) {
  const bar = $("bulk");
  bar.replaceChildren();
  const n = selected.size;
  bar.append(el("span", "confirm", spec.label + " " + n + (n === 1 ? " card?" : " cards?")));
  let input = null;
  if (spec.input) {
    input = el("input");
    input.name = spec.input;
    input.placeholder = spec.placeholder;
    bar.append(input);
  }
  const yes = el("button", null, "Confirm");
  yes.type = "button";
  yes.id = "bulk-confirm";
  yes.addEventListener("click", () => runBulk(action, spec, input));
  const no = el("button", null, "Cancel");
  no.type = "button";
  no.addEventListener("click", bulkBar);
  bar.append(yes, no);
}

async function runBulk(action, spec, input) {
  const body = { ids: [...selected], action };
  if (spec.input === "assignee") body.assignee = input.value.trim() || null;
  if (spec.input === "reason" && input.value.trim()) body.reason = input.value.trim();
  try {
    const answer = await api("api/bulk", body);
    const refused = answer.refused.map((r) => r.task_id + ": " + r.error);
    say(spec.label.toLowerCase() + ": " + answer.done + " done" +
      (refused.length ? "; " + refused.length + " refused (" + refused.slice(0, 3).join("; ") + ")" : ""), refused.length > 0);
    selected.clear();
    await load();
  } catch (err) {
    say(err.message, true);
  }
  bulkBar();
}

function visible(c) {
  const text = $("filter-text").value.trim().toLowerCase();
  const who = $("filter-assignee").value;
  if (c.task.status === "archived" && !$("show-archived").checked) return false;
  if (who && (c.task.assignee || "") !== who) return false;
  if (laneFilter && c.lane !== laneFilter) return false;
  if (text && !(c.task.title + "\n" + c.task.body + "\n" + c.task.id).toLowerCase().includes(text)) return false;
  return true;
}

function place(c) {
  const old = $("card-" + c.task.id);
  if (old) old.remove();
  cards.set(c.task.id, c);
  if (!visible(c)) return;
  const column = $("col-" + c.task.status);
  if (column) column.querySelector(".cards").append(cardNode(c));
}

// Draws every card, each column's cards put in place at once.
function render() {
  drawColumns();
  // The assignee list first: a filter the address asks for applies to the first cards.
  assignees();
  const sorted = [...cards.values()].sort((a, b) => b.task.priority - a.task.priority || a.task.created_at - b.task.created_at);
  const columns = new Map();
  for (const c of sorted) {
    if (!visible(c)) continue;
    if (!columns.has(c.task.status)) columns.set(c.task.status, document.createDocumentFragment());
    columns.get(c.task.status).append(cardNode(c));
  }
  for (const [status, cardsOf] of columns) {
    const column = $("col-" + status);
    if (column) column.querySelector(".cards").append(cardsOf);
  }
  counts();
}

// What a card does when used, one listener each for the whole board: its title opens
// it in the drawer (with a modifier, its page), it is dragged by its id, and its
// checkbox selects it for a bulk action.
function cardEvents(board) {
  const idOf = (node) => node.closest(".card").dataset.id;
  board.addEventListener("click", (e) => {
    if (!e.target.matches(".card .title")) return;
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    openDrawer(idOf(e.target));
  });
  board.addEventListener("dragstart", (e) => {
    const card = e.target.closest && e.target.closest(".card");
    if (card) e.dataTransfer.setData("text/plain", card.dataset.id);
  });
  board.addEventListener("change", (e) => {
    if (!e.target.matches(".card .pick")) return;
    if (e.target.checked) selected.add(idOf(e.target));
    else selected.delete(idOf(e.target));
    bulkBar();
  });
}

function counts() {
  for (const status of STATUSES) {
    const column = $("col-" + status);
    const shown = column.querySelectorAll(".card").length;
    const total = totals.get(status);
    column.querySelector(".count").textContent = total > shown ? shown + " of " + total : shown;
    column.querySelector(".more").hidden = !nextPage.get(status);
    column.hidden = status === "archived" && !$("show-archived").checked;
  }
}

// The assignee the address asks for, kept until the list of assignees is drawn; the card
// it opens in the drawer.
let wantedAssignee = "";
let wantedCard = "";
// The lane whose cards alone are shown (`?lane=NAME`), or "".
let laneFilter = "";

function assignees() {
  const select = $("filter-assignee");
  const chosen = select.value || wantedAssignee;
  const names = new Set([...cards.values()].map((c) => c.task.assignee).filter(Boolean));
  if (chosen) names.add(chosen);
  select.length = 1;
  for (const name of [...names].sort()) select.append(new Option(name, name));
  select.value = chosen;
  wantedAssignee = "";
}

// The filters live in the address (?q=TEXT&assignee=NAME&archived=1): a view can be
// shared as a link and survives a reload. The sign-in token leaves the address once the
// page has read it (its cookie carries on).
function readFilters() {
  const params = new URLSearchParams(location.search);
  $("filter-text").value = params.get("q") || "";
  wantedAssignee = params.get("assignee") || "";
  $("show-archived").checked = params.get("archived") === "1";
  wantedCard = params.get("card") || "";
  laneFilter = params.get("lane") || "";
}

function writeFilters() {
  const params = new URLSearchParams(location.search);
  params.delete("token");
  const set = (key, value) => (value ? params.set(key, value) : params.delete(key));
  set("q", $("filter-text").value.trim());
  set("assignee", $("filter-assignee").value || wantedAssignee);
  set("archived", $("show-archived").checked ? "1" : "");
  set("lane", laneFilter);
  set("card", drawer.id || "");
  const query = params.toString();
  history.replaceState(null, "", location.pathname + (query ? "?" + query : ""));
}

function filtered() {
  writeFilters();
  render();
}

// Keys: `?` lists them, `/` filters, `n` starts a new card, `a` shows or hides the
// archived column, Escape clears the filters or closes the list.
const KEYS = [
  ["?", "show or hide these keys"],
  ["/", "filter by text"],
  ["n", "new card"],
  ["a", "show or hide archived cards"],
  ["j / k", "the next or previous card"],
  ["Enter", "open the card in the drawer"],
  ["Esc", "close the drawer, or clear the filters and close this list"],
];

function keysHelp() {
  let help = $("keys");
  if (!help) {
    help = el("section", "keys");
    help.id = "keys";
    help.setAttribute("role", "dialog");
    help.setAttribute("aria-label", "Keyboard shortcuts");
    help.append(el("h2", null, "Keyboard shortcuts"));
    const list = el("dl");
    for (const [key, what] of KEYS) list.append(el("dt", null, key), el("dd", null, what));
    help.append(list);
    help.hidden = true;
    document.body.append(help);
  }
  return help;
}

function onKey(e) {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName);
  if (e.key === "Escape" && drawer.id) {
    closeDrawer();
    e.preventDefault();
    return;
  }
  if (e.key === "Escape") {
    keysHelp().hidden = true;
    if (typing) e.target.blur();
    $("filter-text").value = "";
    $("filter-assignee").value = "";
    laneFilter = "";
    filtered();
    drawLanes();
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "?") keysHelp().hidden = !keysHelp().hidden;
  else if (e.key === "/") $("filter-text").focus();
  else if (e.key === "n") $("create").title.focus();
  else if (e.key === "j" || e.key === "k") step(e.key === "j" ? 1 : -1);
  else if (e.key === "a") {
    $("show-archived").checked = !$("show-archived").checked;
    writeFilters();
    load().catch((err) => say(err.message, true));
  } else return;
  e.preventDefault();
}

// Moves the focus to the next (or previous) card on the board, in reading order.
function step(by) {
  const titles = [...document.querySelectorAll("#board .card .title")];
  if (!titles.length) return;
  const at = titles.indexOf(document.activeElement);
  const next = at < 0 ? (by > 0 ? 0 : titles.length - 1) : Math.min(titles.length - 1, Math.max(0, at + by));
  titles[next].focus();
  titles[next].scrollIntoView({ block: "nearest" });
}

// The drawer's card and what stops its live log; a read is in flight while `reading`,
// and `again` asks for one more after it (the card changed meanwhile).
const drawer = { id: null, stop: null, reading: false, again: false };

async function openDrawer(id) {
  if (drawer.reading && drawer.id === id) {
    drawer.again = true;
    return;
  }
  const opening = drawer.id !== id;
  drawer.id = id;
  drawer.reading = true;
  try {
    const response = await fetch("tasks/" + encodeURIComponent(id) + "/drawer");
    if (drawer.id !== id) return;
    if (!response.ok) {
      const data = await response.json().catch(() => ({ error: response.statusText }));
      throw new Error(data.error || response.statusText);
    }
    const html = await response.text();
    if (drawer.id !== id) return;
    const article = new DOMParser().parseFromString(html, "text/html").querySelector("article.detail");
    if (drawer.stop) drawer.stop();
    const aside = $("drawer");
    aside.querySelector(".drawer-body").replaceChildren(document.adoptNode(article));
    aside.setAttribute("aria-label", "Card " + id);
    $("drawer-page").href = "tasks/" + encodeURIComponent(id);
    aside.hidden = false;
    drawer.stop = bindCard(article, () => refresh(id));
    if (opening) {
      writeFilters();
      $("drawer-close").focus();
    }
  } catch (e) {
    say(e.message, true);
    if (opening) closeDrawer();
  } finally {
    if (drawer.id === id) drawer.reading = false;
  }
  if (drawer.again && drawer.id === id) {
    drawer.again = false;
    openDrawer(id);
  }
}

function closeDrawer() {
  const id = drawer.id;
  if (drawer.stop) drawer.stop();
  Object.assign(drawer, { id: null, stop: null, reading: false, again: false });
  $("drawer").hidden = true;
  $("drawer").querySelector(".drawer-body").replaceChildren();
  writeFilters();
  const title = id && document.querySelector("#card-" + CSS.escape(id) + " .title");
  if (title) title.focus();
}

// A change to the drawer's card reads it again, unless someone is typing in it.
function drawerChanged(id) {
  if (drawer.id !== id) return;
  const typing = document.activeElement && $("drawer").contains(document.activeElement) &&
    /^(INPUT|TEXTAREA)$/.test(document.activeElement.tagName) && document.activeElement.value;
  if (!typing) openDrawer(id);
}

async function refresh(id) {
  drawerChanged(id);
  try {
    place(await api("api/cards/" + encodeURIComponent(id)));
    counts();
  } catch (e) {
    say(e.message, true);
  }
}

// The lanes (agents that pull work, docs/lanes.md): each one's state and what it holds;
// choosing one shows only the cards it holds. Read again at most every two seconds
// while events come.
let lanes = [];
let lanesRead = 0;
let lanesTimer = null;

async function readLanes() {
  lanesRead = Date.now();
  try {
    lanes = (await api("api/lane-list")).lanes;
  } catch (e) {
    say(e.message, true);
  }
  drawLanes();
}

function lanesLater() {
  if (lanesTimer) return;
  lanesTimer = setTimeout(() => { lanesTimer = null; readLanes(); }, Math.max(0, 2000 - (Date.now() - lanesRead)));
}

function drawLanes() {
  const strip = $("lane-strip");
  strip.replaceChildren();
  strip.hidden = lanes.length === 0;
  if (strip.hidden) return;
  strip.append(el("span", "label", "Lanes:"));
  for (const lane of lanes) {
    const button = el("button", "lane " + lane.state,
      lane.name + " · " + lane.state + (lane.held ? " " + lane.held : "") + " · " + lane.done + " done" +
      (lane.failed ? ", " + lane.failed + " failed" : ""));
    button.type = "button";
    button.dataset.lane = lane.name;
    button.title = "profiles: " + lane.profiles.join(", ");
    button.setAttribute("aria-pressed", String(laneFilter === lane.name));
    button.addEventListener("click", () => {
      laneFilter = laneFilter === lane.name ? "" : lane.name;
      filtered();
      drawLanes();
    });
    strip.append(button);
  }
}

function listen(after) {
  const live = $("live");
  const source = new EventSource("api/events?after=" + after);
  source.onopen = () => { live.textContent = "● live"; live.className = "live on"; };
  source.onerror = () => { live.textContent = "○ reconnecting"; live.className = "live"; };
  source.onmessage = (m) => {
    const event = JSON.parse(m.data);
    refresh(event.task_id);
    if (lanes.length || event.payload && event.payload.lane) lanesLater();
  };
}

// The next page of one column's cards.
async function loadColumn(status) {
  const query = new URLSearchParams({ status, limit: PAGE });
  if (nextPage.get(status)) query.set("after", nextPage.get(status));
  const data = await api("api/cards?" + query);
  for (const c of data.cards) cards.set(c.task.id, c);
  nextPage.set(status, data.next);
  totals.set(status, data.total);
  return data;
}

// The first page of every column shown, read at once (`/api/columns`); the stream
// resumes after the newest event id read before them, so no change made while they were
// read is missed (a change seen twice only refreshes its card again).
async function load() {
  const archived = $("show-archived").checked;
  const data = await api("api/columns?" + new URLSearchParams({ limit: PAGE, archived }));
  cards.clear();
  nextPage.clear();
  totals.clear();
  for (const column of data.columns) {
    for (const c of column.cards) cards.set(c.task.id, c);
    nextPage.set(column.status, column.next);
    totals.set(column.status, column.total);
  }
  serverSkew = data.now - Date.now() / 1000;
  render();
  return data.newest_event;
}

async function create(e) {
  e.preventDefault();
  const form = e.target;
  const body = { title: form.title.value, triage: form.into.value === "triage" };
  if (form.assignee.value.trim()) body.assignee = form.assignee.value.trim();
  try {
    const task = await api("api/tasks", body);
    form.reset();
    say("created " + task.id + " in " + task.status);
    await refresh(task.id);
  } catch (err) {
    say(err.message, true);
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  readFilters();
  writeFilters();
  $("filter-text").addEventListener("input", filtered);
  $("filter-assignee").addEventListener("change", filtered);
  $("show-archived").addEventListener("change", () => { writeFilters(); load(); });
  document.addEventListener("keydown", onKey);
  $("create").addEventListener("submit", create);
  $("drawer-close").addEventListener("click", closeDrawer);
  cardEvents($("board"));
  if (wantedCard) openDrawer(wantedCard);
  try {
    listen(await load());
  } catch (e) {
    say(e.message, true);
  }
  // The lanes after the cards: the board's first frame waits for one read only.
  readLanes();
  setInterval(() => { for (const node of document.querySelectorAll(".card .age")) {
    const c = cards.get(node.closest(".card").dataset.id);
    if (c) node.textContent = age(c.task.created_at);
  } }, 30000);
});
