// The activity feed, live: the feed's socket (hx-ws, #activity-socket) pushes the rows its
// filters keep, which htmx puts on top of the table (activity.html#push). Here: the socket's
// state, the address it resumes at after a break (the newest push names it), and relative
// times ("3 min ago") kept current.
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
    var live = document.getElementById("activity-live");
    var socket = document.getElementById("activity-socket");

    function setLive(up) {
      live.dataset.state = up ? "live" : "down";
      live.textContent = up ? "● live" : "○ reconnecting…";
    }

    function mine(event) { return event.target === socket; }
    document.addEventListener("htmx:ws:after:connection", function (event) { if (mine(event)) setLive(true); });
    document.addEventListener("htmx:ws:close", function (event) { if (mine(event)) setLive(false); });
    document.addEventListener("htmx:ws:after:message:incoming", function (event) {
      if (!mine(event)) return;
      // A reconnection asks only for the rows after the ones shown.
      var resume = document.getElementById("activity-resume");
      if (resume) event.detail.connection.url = kanban.socketAddress(resume.dataset.url);
      showTimes();
    });
    if (socket.dataset.socket === "live") setLive(true);  // opened before this ran
    showTimes();
    setInterval(showTimes, 15000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
