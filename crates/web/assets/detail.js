// A card's detail page: each action form posts to the API and shows the answer; a
// change reloads the page so that every section is read again from the board.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const article = document.querySelector("article.detail");
  const message = document.getElementById("message");
  const id = encodeURIComponent(article.dataset.id);
  for (const form of document.querySelectorAll("form[data-action]")) {
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
        location.reload();
      } else {
        message.textContent = data.error || response.statusText;
        message.className = "message bad";
      }
    });
  }
});
