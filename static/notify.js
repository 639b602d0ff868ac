// Reaching a person who is not looking. On every page: the tab title counts what waits
// for them on all their boards (the header's "Needs you" count, kept live by its socket),
// and, once they allow it, a desktop notification for each new item there of a kind they
// chose on its board (the server sends only those: #inbox-notify). On a board's page,
// also the board's other signals they chose (a completion, a decision) while hidden.
(function () {
  "use strict";

  var baseTitle = document.title.replace(/^\(\d+\) /, "");
  var lastSeq = 0;
  var seenNeeds = null; // the items already known: only later ones notify
  // What the inbox tells of; the board's own pushes notify of the rest.
  var FROM_INBOX = { approval_requested: true, needs_attention: true };

  function waiting() {
    var count = document.getElementById("inbox-count");
    return count ? parseInt(count.textContent, 10) || 0 : 0;
  }

  function updateTitle() {
    var count = waiting();
    var title = (count ? "(" + count + ") " : "") + baseTitle;
    if (document.title !== title) document.title = title;
  }

  function chosenKinds() {
    var kinds = {};
    document.querySelectorAll("#notify-kinds input[name=kinds]:checked").forEach(function (box) {
      kinds[box.value] = true;
    });
    return kinds;
  }

  function permission() {
    return "Notification" in window ? Notification.permission : "unsupported";
  }

  function showPermission() {
    var note = document.getElementById("notify-permission");
    var button = document.getElementById("notify-enable");
    if (!note || !button) return;
    var state = permission();
    note.dataset.state = state;
    if (state === "granted") note.textContent = "Desktop notifications are on for this browser.";
    else if (state === "denied") note.textContent = "This browser blocks notifications from this site; allow them in its site settings.";
    else if (state === "unsupported") note.textContent = "This browser has no desktop notifications.";
    button.hidden = state !== "default";
  }

  function mayNotify() {
    return document.visibilityState === "hidden" && permission() === "granted";
  }

  function show(body, tag, onClick) {
    var note = new Notification(baseTitle, { body: body, tag: tag });
    note.onclick = function () {
      window.focus();
      onClick();
      note.close();
    };
  }

  function openTask(number) {
    var board = document.getElementById("board");
    if (!board || !number || !window.kanban) return;
    window.kanban.showTask(board.dataset.taskUrl.replace("{number}", number), true);
  }

  // New items in the person's inbox, on any board: an item is its board, id and reason,
  // so a task that waited for approval and later fails is news again. What the page was
  // rendered with is no baseline (only what the inbox's socket sent, marked data-live).
  function onInbox() {
    var list = document.getElementById("inbox-notify");
    if (!list || !list.hasAttribute("data-live")) return;
    var first = seenNeeds === null;
    var now = {};
    list.querySelectorAll("li[data-need]").forEach(function (item) {
      var key = item.dataset.need;
      now[key] = true;
      if (!first && !seenNeeds[key] && mayNotify()) {
        show(item.textContent, "kanban-need-" + key, function () { window.location.href = item.dataset.url; });
      }
    });
    seenNeeds = now;
  }

  // Each push replaces #board-events with its own events (boards.consumers).
  function onBoardPush() {
    var items = document.querySelectorAll("#board-events li[data-seq]");
    if (!items.length) return;
    var kinds = chosenKinds();
    items.forEach(function (item) {
      var seq = +item.dataset.seq;
      if (seq <= lastSeq) return;
      lastSeq = seq;
      var signal = item.dataset.signal;
      if (mayNotify() && kinds[signal] && !FROM_INBOX[signal]) {
        var number = item.dataset.task;
        show(item.textContent, "kanban-" + item.dataset.seq, function () { openTask(number); });
      }
    });
  }

  function onMessage() {
    updateTitle();
    onInbox();
    onBoardPush();
  }

  function start() {
    var seq = document.getElementById("board-seq");
    lastSeq = seq ? +seq.dataset.seq : 0;
    updateTitle();
    showPermission();
    var button = document.getElementById("notify-enable");
    if (button) {
      // Asked only from this button, never on load.
      button.addEventListener("click", function () {
        if (permission() !== "default") return showPermission();
        Notification.requestPermission().then(showPermission);
      });
    }
    document.addEventListener("htmx:ws:after:message:incoming", onMessage);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
