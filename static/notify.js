// Reaching a person who is not looking: the tab title counts what waits for them
// ("(2) Demo board"), and, once they allow it, a desktop notification for each change
// of a kind they chose (stored on the server per board) while this tab is hidden.
(function () {
  "use strict";

  var baseTitle = document.title.replace(/^\(\d+\) /, "");
  var lastSeq = 0;

  function waiting() {
    return document.querySelectorAll("#needs [data-need]").length;
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

  function openTask(number) {
    var board = document.getElementById("board");
    if (!board || !number || !window.htmx) return;
    htmx.ajax("GET", "/boards/" + board.dataset.slug + "/tasks/" + number + "/", { target: "#detail", swap: "innerHTML" });
  }

  function notify(item) {
    var number = item.dataset.task;
    var note = new Notification(baseTitle, {
      body: item.textContent,
      tag: "kanban-" + item.dataset.seq,
      data: { task: number }
    });
    note.onclick = function () {
      window.focus();
      openTask(number);
      note.close();
    };
  }

  // Each push replaces #board-events with its own events (boards.consumers).
  function onPush() {
    updateTitle();
    var items = document.querySelectorAll("#board-events li[data-seq]");
    if (!items.length) return;
    var kinds = chosenKinds();
    var hidden = document.visibilityState === "hidden";
    items.forEach(function (item) {
      var seq = +item.dataset.seq;
      if (seq <= lastSeq) return;
      lastSeq = seq;
      if (hidden && permission() === "granted" && kinds[item.dataset.signal]) notify(item);
    });
  }

  function start() {
    if (!document.getElementById("board")) return;
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
    document.addEventListener("htmx:ws:after:message:incoming", onPush);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
