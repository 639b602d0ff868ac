// The activity feed, live: the board's socket (hx-ws, #activity-socket) says something
// happened; the page asks for the rows after the newest it shows (with its filters) and
// puts them on top. Relative times ("3 min ago") are kept current here.
(function () {
  "use strict";

  function ago(seconds) {
    if (seconds < 45) return "just now";
    if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
    if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
    return Math.round(seconds / 86400) + " d ago";
  }

  function showTimes() {
    document.querySelectorAll("main.activity time[data-ago]").forEach(function (el) {
      var text = ago(Math.max(0, (Date.now() - Date.parse(el.getAttribute("datetime"))) / 1000));
      if (el.textContent !== text) el.textContent = text;
    });
  }

  function start() {
    var page = document.querySelector("main.activity");
    if (!page) return;
    var rows = document.getElementById("activity-rows");
    var live = document.getElementById("activity-live");
    var socket = document.getElementById("activity-socket");
    var slug = page.dataset.slug;
    var fetching = false;
    var again = false;

    function setLive(up) {
      live.dataset.state = up ? "live" : "down";
      live.textContent = up ? "● live" : "○ reconnecting…";
    }

    function refresh() {
      if (fetching) { again = true; return; }
      fetching = true;
      var query = page.dataset.filter ? page.dataset.filter.replace(/(^|&)(after|before)=[^&]*/g, "") : "";
      var url = "/boards/" + slug + "/activity/?" + query + (query ? "&" : "") + "after=" + page.dataset.top;
      // The new rows, newest first, go on top of the table (htmx swaps them in).
      htmx.ajax("GET", url, { target: rows, swap: "afterbegin" })
        .then(function () {
          var newest = rows.querySelector("tr[data-seq]");
          if (newest && +newest.dataset.seq > +page.dataset.top) page.dataset.top = newest.dataset.seq;
          var empty = document.getElementById("activity-empty");
          if (empty && newest) empty.remove();
          showTimes();
        })
        .catch(function () { /* the next push asks again */ })
        .finally(function () {
          fetching = false;
          if (again) { again = false; refresh(); }
        });
    }

    // The board's own sequence (not the newest row's, which a filter may hold back): the
    // socket sends only what follows it, never a whole board to catch up.
    var boardSeq = page.dataset.seq;
    function mine(event) { return event.target === socket; }
    document.addEventListener("htmx:ws:before:connection", function (event) {
      if (mine(event)) event.detail.connection.url = "/ws/boards/" + slug + "/?seq=" + boardSeq;
    });
    document.addEventListener("htmx:ws:after:connection", function (event) {
      if (mine(event)) { setLive(true); refresh(); }
    });
    document.addEventListener("htmx:ws:close", function (event) { if (mine(event)) setLive(false); });
    document.addEventListener("htmx:ws:before:message:incoming", function (event) {
      if (!mine(event)) return;
      event.detail.cancelled = true;  // the board's fragments: read here, never swapped
      var text = event.detail.message && event.detail.message.data;
      if (typeof text !== "string") return;
      var marker = text.match(/id="board-seq" data-seq="(\d+)"/);
      if (marker) {
        boardSeq = marker[1];
        event.detail.connection.url = "/ws/boards/" + slug + "/?seq=" + boardSeq;
      }
      if (text.indexOf("<li data-seq=") !== -1) refresh();
    });
    if (socket.dataset.socket === "live") { setLive(true); refresh(); }  // opened before this ran
    showTimes();
    setInterval(showTimes, 15000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
