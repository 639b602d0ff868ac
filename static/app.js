// Agent Kanban board behaviour: keeps columns in number order, catches up on reconnect,
// filters by owner, drags cards between columns, and flags agents that went quiet.
(function () {
  "use strict";

  function board() { return document.getElementById("board"); }

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    try { return JSON.parse(document.body.getAttribute("hx-headers:inherited"))["X-CSRFToken"]; }
    catch (e) { return ""; }
  }

  // Pushed cards are appended to their column; the page keeps each column in number
  // order so a pushed board and a reloaded one are the same DOM.
  function sortColumns() {
    document.querySelectorAll(".cards").forEach(function (list) {
      var cards = Array.prototype.slice.call(list.children);
      var sorted = true;
      // data-sort: the number in open columns, the finishing time (newest first) in Completed.
      var key = function (card) { return +(card.dataset.sort || card.dataset.taskId); };
      for (var i = 1; i < cards.length; i++) {
        if (key(cards[i - 1]) > key(cards[i])) { sorted = false; break; }
      }
      if (sorted) return;
      cards.sort(function (a, b) { return key(a) - key(b); });
      cards.forEach(function (card) { list.appendChild(card); });
    });
  }

  function socketUrl() {
    var el = board();
    var seq = document.getElementById("board-seq");
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + location.host + "/ws/boards/" + el.dataset.slug + "/?seq=" + (seq ? seq.dataset.seq : "");
  }

  function setLive(state) {
    var el = document.getElementById("live-status");
    if (!el) return;
    document.documentElement.dataset.live = state;
    el.dataset.state = state;
    el.textContent = state === "live" ? "● live" : "○ reconnecting…";
  }

  function applyFilter() {
    var select = document.getElementById("owner-filter");
    var style = document.getElementById("owner-filter-style");
    if (!select) return;
    if (!style) {
      style = document.createElement("style");
      style.id = "owner-filter-style";
      document.head.appendChild(style);
    }
    var owner = select.value;
    var rule = owner
      ? '#board .card:not([data-owner="' + CSS.escape(owner) + '"]) { display: none; }'
      : "";
    // Rewriting an unchanged style sheet would restyle the whole page on every push.
    if (style.textContent !== rule) style.textContent = rule;
  }

  function markStale() {
    var el = board();
    if (!el) return;
    var idle = +el.dataset.idleSeconds || 300;
    var now = Date.now() / 1000;
    var stale = {};
    document.querySelectorAll("#roster .roster-row").forEach(function (row) {
      var quiet = +row.dataset.inProgress > 0 && now - +row.dataset.lastSeen > idle;
      row.classList.toggle("roster-row--stale", quiet);
      if (quiet) stale[row.dataset.agent] = true;
    });
    document.querySelectorAll("#board .card").forEach(function (card) {
      card.classList.toggle("card--stale", card.dataset.status === "in_progress" && !!stale[card.dataset.owner]);
    });
  }

  function loadDetail(number) {
    var el = board();
    return fetch("/boards/" + el.dataset.slug + "/tasks/" + number + "/", {
      headers: { "HX-Request": "true" }, credentials: "same-origin"
    }).then(function (response) {
      if (response.status === 404) return '<p class="muted">Task #' + number + " was deleted.</p>";
      return response.text();
    }).then(showDetail);
  }

  function showDetail(html) {
    var detail = document.getElementById("detail");
    detail.innerHTML = html;
    if (window.htmx && htmx.process) htmx.process(detail);
  }

  function moveCard(number, column) {
    var el = board();
    var body = new URLSearchParams({ status: column });
    fetch("/boards/" + el.dataset.slug + "/tasks/" + number + "/status/", {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" }
    }).then(function (response) { return response.text(); }).then(showDetail);
  }

  function setUpDragAndDrop() {
    var el = board();
    el.addEventListener("dragstart", function (event) {
      var card = event.target.closest && event.target.closest(".card[draggable=true]");
      if (!card) return;
      event.dataTransfer.setData("text/plain", card.dataset.taskId);
      event.dataTransfer.effectAllowed = "move";
      card.classList.add("dragging");
    });
    el.addEventListener("dragend", function (event) {
      var card = event.target.closest && event.target.closest(".card");
      if (card) card.classList.remove("dragging");
      document.querySelectorAll(".column.drop-target").forEach(function (c) { c.classList.remove("drop-target"); });
    });
    el.addEventListener("dragover", function (event) {
      var column = event.target.closest && event.target.closest(".column");
      if (!column || column.dataset.column === "blocked") return;
      event.preventDefault();
      column.classList.add("drop-target");
    });
    el.addEventListener("dragleave", function (event) {
      var column = event.target.closest && event.target.closest(".column");
      if (column && !column.contains(event.relatedTarget)) column.classList.remove("drop-target");
    });
    el.addEventListener("drop", function (event) {
      var column = event.target.closest && event.target.closest(".column");
      if (!column || column.dataset.column === "blocked") return;
      event.preventDefault();
      column.classList.remove("drop-target");
      var number = event.dataTransfer.getData("text/plain");
      if (number) moveCard(number, column.dataset.column);
    });
  }

  // Registered when this script runs, before htmx (loaded after it) opens the socket,
  // on document because the extension's events bubble up from the #board element.
  document.addEventListener("htmx:ws:before:connection", function (event) {
    if (board()) event.detail.connection.url = socketUrl();
  });
  document.addEventListener("htmx:ws:after:connection", function () { setLive("live"); });
  document.addEventListener("htmx:ws:close", function () { setLive("down"); });
  // A pushed approvals strip replaces its inputs: keep what a person was typing there.
  var typed = null;
  document.addEventListener("htmx:ws:before:message:incoming", function () {
    typed = {};
    document.querySelectorAll("#approvals [data-approval-task] input[name=note]").forEach(function (input) {
      var item = input.closest("[data-approval-task]").dataset.approvalTask;
      typed[item] = { value: input.value, focused: input === document.activeElement,
                      start: input.selectionStart, end: input.selectionEnd };
    });
  });

  function restoreTyped() {
    if (!typed) return;
    Object.keys(typed).forEach(function (item) {
      var input = document.querySelector('#approvals [data-approval-task="' + item + '"] input[name=note]');
      var saved = typed[item];
      if (!input || input.value === saved.value) return;
      input.value = saved.value;
      if (saved.focused) {
        input.focus();
        input.setSelectionRange(saved.start, saved.end);
      }
    });
    typed = null;
  }

  document.addEventListener("htmx:ws:after:message:incoming", function (event) {
    restoreTyped();
    // A visible-again tab reconnects without before:connection, so keep the URL current.
    event.detail.connection.url = socketUrl();
    markStale();
    var open = document.querySelector("#detail [data-detail-task]");
    var text = event.detail.message && event.detail.message.data;
    if (open && typeof text === "string") {
      var number = open.dataset.detailTask;
      if (text.indexOf('id="task-' + number + '"') !== -1) loadDetail(number);
    }
  });

  // Each lease shows its time left, counted down here between pushes (a renewal is pushed).
  function showLeases() {
    document.querySelectorAll("time[data-lease]").forEach(function (el) {
      var left = Math.round((Date.parse(el.getAttribute("datetime")) - Date.now()) / 1000);
      var text;
      if (left <= 0) text = "lapsing";
      else if (left < 120) text = left + " s left";
      else if (left < 7200) text = Math.round(left / 60) + " min left";
      else text = Math.round(left / 3600) + " h left";
      if (el.textContent !== text) el.textContent = text;
    });
  }

  function start() {
    var el = board();
    if (!el) return;
    new MutationObserver(function () { sortColumns(); showLeases(); })
      .observe(el, { childList: true, subtree: true });
    document.getElementById("owner-filter").addEventListener("change", applyFilter);
    setUpDragAndDrop();
    setInterval(markStale, 10000);
    setInterval(showLeases, 1000);
    showLeases();
    window.addEventListener("pageshow", function (event) { if (event.persisted) location.reload(); });
    sortColumns();
    markStale();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
