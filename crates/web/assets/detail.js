// A card's article, on its own page or in the board's drawer: each action form posts to
// the API and shows the answer, and while a worker runs its log follows
// api/tasks/ID/log. Log text is untrusted: it only ever reaches the page through
// textContent, and the page keeps its last LOG_KEEP characters.
"use strict";

const LOG_KEEP = 64 * 1024;

// Follows the live log of the article's card from where its page left it; returns the
// stream (closed by its caller), or null when the card runs nothing.
function followLog(article) {
  const pre = article.querySelector("pre.log[data-live]");
  if (!pre) return null;
  const id = encodeURIComponent(article.dataset.id);
  const source = new EventSource("api/tasks/" + id + "/log?after=" + pre.dataset.after);
  source.addEventListener("log", (m) => {
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    let text = pre.textContent + JSON.parse(m.data);
    if (text.length > LOG_KEEP) {
      text = text.slice(text.length - LOG_KEEP);
      text = text.slice(text.indexOf("\n") + 1);
    }
    pre.textContent = text;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  });
  return source;
}

// Binds the article's forms and follows its log; `changed` runs after the board took an
// action. Returns what stops it (the log's stream).
function bindCard(article, changed) {
  const message = article.querySelector(".message");
  const id = encodeURIComponent(article.dataset.id);
  for (const form of article.querySelectorAll("form[data-action]")) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const action = form.dataset.action;
      const body = {};
      if (action === "comment") body.body = form.body.value;
      if (action === "assign") body.assignee = form.assignee.value.trim() || null;
      if (action === "edit") body.title = form.title.value;
      if (action === "request-changes") body.reason = form.reason.value;
      if (action === "decompose") {
        message.textContent = "asking the model…";
        message.className = "message";
      }
      const response = await fetch("api/tasks/" + id + "/" + action, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      const data = await response.json().catch(() => ({ error: response.statusText }));
      if (response.ok) {
        changed(action);
      } else {
        message.textContent = data.error || response.statusText;
        message.className = "message bad";
      }
    });
  }
  const log = followLog(article);
  return () => { if (log) log.close(); };
}

document.addEventListener("DOMContentLoaded", () => {
  const article = document.querySelector("main > article.detail");
  if (article) bindCard(article, () => location.reload());
});
