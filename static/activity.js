// The activity feed, live: the board's socket says something happened; the page asks
// for the rows after the newest it shows (with its filters) and puts them on top.
(function () {
  "use strict";

  function start() {
    var page = document.querySelector("main.activity");
    if (!page) return;
    var rows = document.getElementById("activity-rows");
    var live = document.getElementById("activity-live");
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
      fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : ""; })
        .then(function (html) {
          if (html.trim()) {
            var holder = document.createElement("tbody");
            holder.innerHTML = html;
            var newest = holder.querySelector("tr[data-seq]");
            if (newest) page.dataset.top = newest.dataset.seq;
            while (holder.lastElementChild) rows.insertBefore(holder.lastElementChild, rows.firstElementChild);
            var empty = document.getElementById("activity-empty");
            if (empty) empty.remove();
          }
        })
        .finally(function () {
          fetching = false;
          if (again) { again = false; refresh(); }
        });
    }

    // The board's own sequence (not the newest row's, which a filter may hold back): the
    // socket sends only what follows it, never a whole board to catch up.
    var boardSeq = page.dataset.seq;
    var delay = 500;
    function connect() {
      var scheme = location.protocol === "https:" ? "wss://" : "ws://";
      var socket = new WebSocket(scheme + location.host + "/ws/boards/" + slug + "/?seq=" + boardSeq);
      socket.onopen = function () { delay = 500; setLive(true); refresh(); };
      socket.onmessage = function (message) {
        if (typeof message.data !== "string") return;
        var marker = message.data.match(/id="board-seq" data-seq="(\d+)"/);
        if (marker) boardSeq = marker[1];
        if (message.data.indexOf("<li data-seq=") !== -1) refresh();
      };
      socket.onclose = function (event) {
        setLive(false);
        if (event.code >= 4400 && event.code < 4500) return; // logged out or no access
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 10000);
      };
    }
    connect();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
