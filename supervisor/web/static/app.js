// supervisor web: the one script of the dashboard's pages (no inline script: the
// Content-Security-Policy allows only this file). It follows the server's streams and sets
// text with textContent only: what a worker or a repository wrote never becomes markup.
"use strict";

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
  return td;
}

let leaving = false; // a form was sent: its answer is the next page, not a reload
document.addEventListener("submit", () => {
  leaving = true;
});

function followEvents(body) {
  const table = document.querySelector("#events tbody");
  const after = body.dataset.last || "0";
  const source = new EventSource(body.dataset.events + "?after=" + encodeURIComponent(after));
  source.addEventListener("event", (message) => {
    const event = JSON.parse(message.data);
    const row = document.createElement("tr");
    row.dataset.id = String(event.id);
    for (const text of event.cells) cell(row, text);
    table.appendChild(row);
  });
  source.addEventListener("status", (message) => {
    const state = JSON.parse(message.data);
    const status = document.getElementById("status");
    document.getElementById("step").textContent = state.step;
    if (status.textContent !== state.status) {
      const waits = ["awaiting_approval", "budget_exceeded"];
      const panel = document.getElementById("approval") !== null;
      status.textContent = state.status;
      status.dataset.status = state.status;
      // A task that now waits for a person (or no longer does): draw the approval panel.
      if (waits.includes(state.status) !== panel && !leaving) window.location.reload();
    }
  });
  source.addEventListener("trouble", () => source.close());
}

function followBoard(body) {
  const rows = document.getElementById("rows");
  const source = new EventSource(body.dataset.board);
  source.addEventListener("board", (message) => {
    const found = JSON.parse(message.data);
    const fresh = document.createDocumentFragment();
    for (const item of found) {
      const row = document.createElement("tr");
      row.dataset.key = item.key;
      if (item.needs_you) row.className = "needs";
      cell(row, item.repo);
      const link = document.createElement("a");
      link.href = "/r/" + item.key.split("-")[0] + "/w/" + String(item.id);
      link.textContent = String(item.id);
      cell(row, "").appendChild(link);
      const status = cell(row, item.status);
      status.className = "status";
      status.dataset.status = item.status;
      cell(row, item.step);
      cell(row, item.task).className = "task";
      cell(row, item.elapsed);
      cell(row, String(item.tokens));
      cell(row, item.cost);
      fresh.appendChild(row);
    }
    if (found.length === 0) {
      const row = document.createElement("tr");
      row.className = "empty";
      cell(row, "No workflows.").colSpan = 8;
      fresh.appendChild(row);
    }
    rows.replaceChildren(fresh);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const body = document.body;
  if (body.dataset.events) followEvents(body);
  if (body.dataset.board) followBoard(body);
});
