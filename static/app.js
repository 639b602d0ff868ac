// Agent Kanban board behaviour: catches up on reconnect,
// searches and filters (on the server, which swaps in a socket that keeps to them), drags cards between columns, and flags agents that went quiet; on a
// phone shows one column at a time (tabs) and the details as a sheet; moves cards from
// the keyboard (a menu on each card, shortcut keys); announces pushed changes politely.
(function () {
  "use strict";

  // The breakpoints of app.css: below the first the details open as a modal sheet, below
  // the second the board shows one column at a time.
  var sheetQuery = window.matchMedia("(max-width: 1099.98px)");
  var phoneQuery = window.matchMedia("(max-width: 759.98px)");

  function board() { return document.getElementById("board"); }
  function byId(id) { return document.getElementById(id); }
  function each(selector, fn, root) {
    Array.prototype.forEach.call((root || document).querySelectorAll(selector), fn);
  }
  function shown(el) { return !!el && el.getClientRects().length > 0; }

  // A socket's address from the path the server rendered (an hx-ws:connect, a pushed
  // resume address): the extension opens what a page script gives it as is.
  function socketAddress(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  }

  // The search and filters the columns show now (the page's query string, as the server
  // read it): the socket carries them, so pushes keep to them.
  function currentFilter() {
    var el = byId("board-filter");
    return el ? el.dataset.query || "" : "";
  }

  // The board's socket (#board-socket's hx-ws:connect, with the filters it was rendered
  // with), from the sequence the page shows now: a reconnect catches up from there.
  function socketUrl() {
    var url = new URL(byId("board-socket").getAttribute("hx-ws:connect"), location.href);
    url.searchParams.set("seq", byId("board-seq").dataset.seq);
    return socketAddress(url.pathname + url.search);
  }

  // ---- Announcements: one polite live region, one summary per burst of pushes ----------

  var announceTimer = null;
  function announce(text) {
    var region = byId("announcer");
    if (!region || !text) return;
    // Emptied first, so the same sentence twice is still read twice.
    region.textContent = "";
    clearTimeout(announceTimer);
    announceTimer = setTimeout(function () { region.textContent = text; }, 60);
  }

  function progressText() {
    var el = document.querySelector("#board-summary .progress-text");
    return el ? el.textContent.trim() : "";
  }

  var heard = [];
  var heardTimer = null;
  var heardSince = 0;
  var lastProgress = "";

  function sentence(text) { return /[.!?…”]$/.test(text) ? text : text + "."; }

  function summarise(items) {
    if (items.length === 1) return sentence(items[0]);
    var shownItems = items.slice(0, 3).join("; ");
    var rest = items.length > 3 ? "; and " + (items.length - 3) + " more" : "";
    return items.length + " changes: " + shownItems + rest + ".";
  }

  function flushHeard() {
    clearTimeout(heardTimer);
    heardTimer = null;
    var items = heard;
    heard = [];
    heardSince = 0;
    if (!items.length) return;
    var text = summarise(items);
    var progress = progressText();
    if (progress && progress !== lastProgress) text += " " + progress + ".";
    lastProgress = progress;
    announce(text);
  }

  // Each push replaces #board-events with exactly its own events (one sentence each);
  // a burst of pushes within 400 ms (at most 2 s) becomes one announcement.
  function collectEvents() {
    var list = byId("board-events");
    if (!list || list.dataset.announced) return;
    list.dataset.announced = "1";
    each("li", function (li) {
      var text = li.textContent.trim();
      if (text) heard.push(text);
    }, list);
    if (!heard.length) return;
    if (!heardSince) heardSince = Date.now();
    clearTimeout(heardTimer);
    heardTimer = setTimeout(flushHeard, Date.now() - heardSince > 2000 ? 0 : 400);
  }

  var liveState = "";
  function setLive(state) {
    var el = byId("live-status");
    if (!el) return;
    el.dataset.state = state;
    if (state === "down" && liveState === "live") announce("Live updates lost; reconnecting.");
    if (state === "live" && liveState === "down") announce("Live updates are back.");
    liveState = state;
  }

  // ---- Search and filters (the server filters the columns) ------------------------------

  // The form asks the server (htmx, hx-push-url) for the columns as the filters keep them,
  // with the sequence they were read at and a new #board-socket for those filters from
  // that sequence: htmx closes the old socket as it swaps it out and opens the new one.
  function setUpFilters() {
    // Back and forward: the page at that address, as the server filters it.
    document.addEventListener("htmx:before:history:restore", function (event) {
      event.preventDefault();
      location.reload();
    });
  }

  // ---- Column tabs (phones) -------------------------------------------------------------

  function tabKey() { return "kanban-tab:" + board().dataset.slug; }
  function onPhone() { return phoneQuery.matches && !!board().dataset.tab; }

  function selectTab(key, focusTab) {
    var el = board();
    if (!byId("column-" + key)) return;
    el.dataset.tab = key;
    each(".column-tab", function (tab) {
      var on = tab.dataset.tab === key;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
      if (on && focusTab) tab.focus();
    });
    each(".columns .column", function (column) {
      column.classList.toggle("column--current", column.dataset.column === key);
    });
    try { sessionStorage.setItem(tabKey(), key); } catch (e) { /* storage refused: fine */ }
  }

  // The tabs show the columns' counts, which pushes update in #count-<column>.
  // A phone's tabs carry each column's count (without what it holds) and a mark on the
  // columns a person should look at (failed work, stuck work).
  function syncTabCounts() {
    each(".tab-count[data-count-of]", function (span) {
      var count = byId("count-" + span.dataset.countOf);
      if (!count) return;
      if (span.textContent !== count.textContent) span.textContent = count.textContent;
      var tab = span.closest(".column-tab");
      if (tab) tab.classList.toggle("column-tab--problem", count.dataset.problem === "1");
    });
  }

  function firstTabWithAProblem() {
    var marked = document.querySelector(".count[data-problem='1']");
    return marked ? marked.id.replace(/^count-/, "") : null;
  }

  function setUpTabs() {
    var list = document.querySelector(".column-tabs");
    if (!list) return;
    var saved = null;
    try { saved = sessionStorage.getItem(tabKey()); } catch (e) { /* no storage */ }
    syncTabCounts();
    selectTab(saved && byId("column-" + saved) ? saved : firstTabWithAProblem() || "pending");
    list.addEventListener("click", function (event) {
      var tab = event.target.closest(".column-tab");
      if (tab) selectTab(tab.dataset.tab);
    });
    list.addEventListener("keydown", function (event) {
      var tabs = Array.prototype.slice.call(list.querySelectorAll(".column-tab"));
      var i = tabs.indexOf(event.target.closest(".column-tab"));
      if (i < 0) return;
      var next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[event.key];
      if (next === undefined) return;
      event.preventDefault();
      selectTab(tabs[(next + tabs.length) % tabs.length].dataset.tab, true);
    });
  }

  // ---- Focus on cards -------------------------------------------------------------------

  // Focus a card's link (or its Move button); `follow` switches the phone's tab to it.
  function focusCard(card, options) {
    options = options || {};
    var column = card.closest(".column");
    if (options.follow && column && onPhone() && column.dataset.column !== board().dataset.tab) {
      selectTab(column.dataset.column);
    }
    var target = (options.move && card.querySelector("[data-move-menu]")) || card.querySelector(".card-link");
    if (shown(target)) { target.focus(); return true; }
    return false;
  }

  function visibleCards(column) {
    return Array.prototype.filter.call(column.querySelectorAll(".card"), function (card) {
      return getComputedStyle(card).display !== "none";
    });
  }

  function focusNextCard(card, step) {
    var cards = visibleCards(card.closest(".column"));
    var next = cards[cards.indexOf(card) + step];
    if (next) focusCard(next);
  }

  // The card at the same height in the next column that has any (on a phone: the next tab).
  function focusNextColumn(card, step) {
    var columns = Array.prototype.slice.call(document.querySelectorAll(".columns .column"));
    var from = card.closest(".column");
    var row = visibleCards(from).indexOf(card);
    for (var i = columns.indexOf(from) + step; i >= 0 && i < columns.length; i += step) {
      var cards = visibleCards(columns[i]);
      if (onPhone()) {
        selectTab(columns[i].dataset.column, !cards.length);
        if (cards.length) focusCard(cards[Math.min(row, cards.length - 1)]);
        return;
      }
      if (cards.length) { focusCard(cards[Math.min(row, cards.length - 1)]); return; }
    }
  }

  // A pushed card replaces the old one: keep a person's focus on it (and follow a card
  // they moved themselves into its new column).
  var focusBefore = null;
  var followCard = null;

  function rememberFocus() {
    var active = document.activeElement;
    var card = active && active.closest && active.closest("#board .card");
    focusBefore = card ? { number: card.dataset.taskId, move: active.matches("[data-move-menu]") } : null;
    var need = active && active.closest && active.closest("#needs .need");
    focusedNeed = need && active === need ? need.dataset.need : null;
  }

  function restoreFocus() {
    var saved = focusBefore;
    focusBefore = null;
    var active = document.activeElement;
    if (active && active !== document.body && active.isConnected) return;
    if (focusedNeed) {
      var need = document.querySelector('#needs .need[data-need="' + focusedNeed + '"]');
      focusedNeed = null;
      if (need) { need.focus(); return; }
    }
    if (followCard) {
      var moved = byId("task-" + followCard.number);
      var column = moved && moved.closest(".column");
      if (column && column.dataset.column === followCard.column) {
        followCard = null;
        focusCard(moved, { follow: true });
        return;
      }
    }
    if (!saved) return;
    var card = byId("task-" + saved.number);
    if (card) focusCard(card, { move: saved.move });
  }

  // ---- The detail panel, a modal sheet on narrow screens --------------------------------

  var placeholder = "";
  // Set when a swap replaced what a person was on inside the panel.
  var focusDetail = false;

  function detailSheet() { return byId("detail-sheet"); }

  function focusDetailHeading(detail) {
    var heading = detail.querySelector("[role=alert], .panel h2") || detail.firstElementChild;
    if (!heading) return;
    if (!heading.hasAttribute("tabindex")) heading.setAttribute("tabindex", "-1");
    heading.focus();
  }

  // The one way a page script shows a task in the panel (#detail), on the board and on the
  // graph: htmx asks for the address the server rendered (the panel's data-task-url, the
  // graph page's data-task-url) and swaps the answer in; #detail's hx-sync lets the newest
  // ask win. ``asked``: a person asked for it (a click, a key), so it takes the focus (on
  // a narrow board, as a sheet); a refresh after a push, sent from the panel itself, leaves
  // the focus where it is (the server tells which: ``kanban:asked``, views/common.py).
  function showTask(url, asked) {
    // Asked from the panel's container (its targets go to the panel, so htmx names the
    // panel in HX-Target); refreshed from the panel itself, morphed (see setUpDetail).
    var detail = byId("detail");
    var source = asked ? detail.parentNode.closest("[hx-target\\:inherited]") : detail;
    return htmx.ajax("GET", url, { source: source, target: detail, swap: asked ? "innerHTML" : "innerMorph" });
  }
  window.kanban = { showTask: showTask, socketAddress: socketAddress };

  // The panel on any page that has one (the board, the graph); the sheet on the board.
  function setUpDetail() {
    var detail = byId("detail");
    if (!detail) return;
    placeholder = detail.innerHTML;
    // The task the panel shows, shown again (a refresh after a push, the answer to one of
    // its forms), is morphed into it: the focus, the caret and what a person typed or
    // chose stay, for a field they changed is marked for htmx's morph to skip. The form
    // they sent starts again from the answer; a refused one keeps what they typed.
    detail.addEventListener("input", function (event) {
      event.target.setAttribute("hx-morph-skip", "");
    });
    detail.addEventListener("htmx:config:request", function (event) {
      if (event.target.closest("form")) event.detail.ctx.swap = "innerMorph";
    });
    detail.addEventListener("htmx:after:swap", function (event) {
      var form = event.target.closest && event.target.closest("form");
      if (!form || !event.detail.ctx.response || event.detail.ctx.response.status >= 400) return;
      each("[hx-morph-skip]", function (field) { field.removeAttribute("hx-morph-skip"); }, form);
      form.reset();
    });
    // A swap that took away what a person was on inside the panel: give them its heading.
    document.addEventListener("htmx:before:swap", function (event) {
      var ctx = event.detail.ctx;
      if (ctx.target === detail && !/^none\b/.test(ctx.swap || "") && detail.contains(document.activeElement)) {
        focusDetail = true;
      }
    });
    document.addEventListener("htmx:after:swap", function (event) {
      if (!focusDetail || event.detail.ctx.target !== detail) return;
      focusDetail = false;
      if (!detail.contains(document.activeElement)) focusDetailHeading(detail);
    });
    // The server says a person asked for what the panel shows now: it takes the focus,
    // opened as a sheet on a narrow screen.
    detail.addEventListener("kanban:asked", function () {
      var sheet = detailSheet();
      if (sheet && sheetQuery.matches && !sheet.open) sheet.showModal();
      focusDetailHeading(detail);
    });
    // The sheet closes by itself (its Close button's command, Esc, a click on the
    // backdrop beside it: closedby="any"); what it showed goes with it.
    var sheet = detailSheet();
    if (!sheet) return;
    sheet.addEventListener("close", function () {
      if (sheet.dataset.keep) { delete sheet.dataset.keep; return; }
      var open = detail.querySelector("[data-detail-task]");
      var number = open && open.dataset.detailTask;
      detail.innerHTML = placeholder;
      // The browser gives focus back to what opened the sheet; a pushed card is a new node.
      var active = document.activeElement;
      if (number && (!active || active === document.body || sheet.contains(active))) {
        var card = byId("task-" + number);
        if (card) focusCard(card, { follow: true });
      }
    });
    // Wider again: the panel goes back beside the columns, with what it showed.
    sheetQuery.addEventListener("change", function () {
      if (!sheetQuery.matches && sheet.open) {
        sheet.dataset.keep = "1";
        sheet.close();
      }
    });
  }

  // Esc beside the columns (a wide screen): the panel shows no task again and the focus
  // goes back to the task's card. A sheet (a modal dialog) closes by itself on Esc.
  function closeDetail() {
    var detail = byId("detail");
    var open = detail && detail.querySelector("[data-detail-task]");
    if (!open) return false;
    var sheet = detailSheet();
    if (sheet && sheet.open) { sheet.close(); return true; }
    var number = open.dataset.detailTask;
    detail.innerHTML = placeholder;
    var card = byId("task-" + number);
    if (card) focusCard(card, { follow: true });
    return true;
  }

  // ---- Moving cards: drag and drop, and the Move menu -----------------------------------

  // Posts the new status (htmx, from #move-menu: see its hx-sync and hx-status), to the
  // task's "status" action beside the address its card links to. The answer (the task's
  // panel) is shown beside the board; on a narrow screen only a refusal is, in the sheet,
  // so a move does not cover the board. The push moves the card and announces it.
  function moveCard(number, column) {
    var card = byId("task-" + number);
    var link = card && card.querySelector(".card-link");
    if (!link) return Promise.resolve();
    return htmx.ajax("POST", new URL("status/", link.href).pathname, {
      source: moveMenu(), values: { status: column }, target: "#detail",
      swap: sheetQuery.matches ? "none" : "innerHTML"
    });
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

  // One menu for every card (cards are pushed fragments, the same for every viewer).
  var menuCard = null;

  function moveMenu() { return byId("move-menu"); }
  function menuItems() {
    return Array.prototype.filter.call(moveMenu().querySelectorAll("[role=menuitem]"), function (item) {
      return !item.hidden;
    });
  }

  function openMoveMenu(button) {
    var menu = moveMenu();
    var card = button.closest(".card");
    var column = card.closest(".column");
    if (!menu || !column) return;
    closeMoveMenu(false);
    menuCard = { number: card.dataset.taskId, column: column.dataset.column, button: button };
    menu.setAttribute("aria-label", "Move #" + card.dataset.taskId + " to");
    each("[data-move-to]", function (item) { item.hidden = item.dataset.moveTo === column.dataset.column; }, menu);
    menu.hidden = false;
    // Under the button, inside the window.
    var rect = button.getBoundingClientRect();
    var width = menu.offsetWidth;
    var height = menu.offsetHeight;
    var left = Math.max(8, Math.min(rect.right - width, window.innerWidth - width - 8));
    var top = rect.bottom + 4;
    if (top + height > window.innerHeight - 8) top = Math.max(8, rect.top - height - 4);
    menu.style.left = left + "px";
    menu.style.top = top + "px";
    button.setAttribute("aria-expanded", "true");
    var items = menuItems();
    if (items.length) items[0].focus();
  }

  function closeMoveMenu(refocus) {
    var menu = moveMenu();
    if (!menu || menu.hidden) return;
    menu.hidden = true;
    var opened = menuCard;
    menuCard = null;
    if (!opened) return;
    opened.button.setAttribute("aria-expanded", "false");
    if (!refocus) return;
    // The card may have been pushed again meanwhile: focus its button in the new one.
    var card = byId("task-" + opened.number);
    if (opened.button.isConnected) opened.button.focus();
    else if (card) focusCard(card, { move: true });
  }

  function moveFromMenu(to) {
    var opened = menuCard;
    if (!opened) return;
    closeMoveMenu(true);
    followCard = { number: opened.number, column: to };
    moveCard(opened.number, to);
  }

  function setUpMoveMenu() {
    var menu = moveMenu();
    if (!menu) return;
    board().addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-move-menu]");
      if (!button) return;
      event.preventDefault();
      if (menuCard && menuCard.button === button) closeMoveMenu(true);
      else openMoveMenu(button);
    });
    menu.addEventListener("click", function (event) {
      var item = event.target.closest("[data-move-to]");
      if (item) moveFromMenu(item.dataset.moveTo);
    });
    // A refused move (4xx, the alert in the task's panel, which the server says a person
    // asked for): the focus goes to the alert, not after the card.
    menu.addEventListener("htmx:response:error", function () { followCard = null; });
    menu.addEventListener("keydown", function (event) {
      var items = menuItems();
      var i = items.indexOf(document.activeElement);
      var next = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: items.length - 1 }[event.key];
      if (next !== undefined) {
        event.preventDefault();
        items[(next + items.length) % items.length].focus();
      } else if (event.key === "Escape" || event.key === "Tab") {
        event.preventDefault();
        closeMoveMenu(true);
      }
    });
    document.addEventListener("pointerdown", function (event) {
      if (menuCard && !menu.contains(event.target) && event.target !== menuCard.button) closeMoveMenu(false);
    });
    window.addEventListener("resize", function () { closeMoveMenu(false); });
  }

  // ---- The triage strip ("Needs you") ----------------------------------------------------

  // A push replaces the strip whole (the same for every person): what this person folded
  // or opened is kept here and put back after each push.
  var openNeeds = {};
  var focusedNeed = null;

  function foldKey() { return "needs-folded:" + (board() ? board().dataset.slug : ""); }

  function applyStrip() {
    var strip = byId("needs");
    if (!strip || !board() || !board().contains(strip)) return;
    var folded = false;
    try { folded = sessionStorage.getItem(foldKey()) === "1"; } catch (e) { /* no storage */ }
    strip.classList.toggle("needs--folded", folded);
    var toggle = strip.querySelector("[data-needs-toggle]");
    if (toggle) toggle.setAttribute("aria-expanded", folded ? "false" : "true");
    strip.querySelectorAll(".need[data-need]").forEach(function (item) {
      var open = !!openNeeds[item.dataset.need];
      item.classList.toggle("need--open", open);
      var expand = item.querySelector("[data-need-expand]");
      if (expand) expand.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }

  function needItems() {
    return Array.prototype.filter.call(document.querySelectorAll("#board #needs .need[data-need]"), shown);
  }

  function toggleNeed(item) {
    var key = item.dataset.need;
    if (openNeeds[key]) delete openNeeds[key]; else openNeeds[key] = true;
    applyStrip();
    var more = item.querySelector("details.need-more");
    // A task's "what is decided" loads when it is first opened (its details' toggle).
    if (openNeeds[key] && more && !more.open && more.hasAttribute("hx-get")) more.open = true;
  }

  function setUpStrip() {
    document.addEventListener("click", function (event) {
      var toggle = event.target.closest && event.target.closest("#board [data-needs-toggle]");
      if (toggle) {
        var folded = !byId("needs").classList.contains("needs--folded");
        try { sessionStorage.setItem(foldKey(), folded ? "1" : "0"); } catch (e) { /* no storage */ }
        applyStrip();
        return;
      }
      var expand = event.target.closest && event.target.closest("#board [data-need-expand]");
      if (expand) toggleNeed(expand.closest(".need"));
    });
    applyStrip();
  }

  // j/k go through the strip's items, a approves the focused one, d denies it, Enter
  // opens it; true when the key was the strip's.
  function stripKey(event) {
    var key = event.key;
    var item = event.target.closest && event.target.closest("#board #needs .need");
    if (key === "j" || key === "k") {
      var items = needItems();
      if (!items.length) { announce("Nothing waits for you."); return true; }
      var at = items.indexOf(item);
      var next = at < 0 ? (key === "j" ? 0 : items.length - 1)
        : Math.min(items.length - 1, Math.max(0, at + (key === "j" ? 1 : -1)));
      items[next].focus();
      items[next].scrollIntoView({ block: "nearest" });
      return true;
    }
    if (!item) return false;
    if (key === "Enter" && event.target === item) { toggleNeed(item); return true; }
    if (key === "a" || key === "d") {
      var action = key === "a" ? "approve" : "deny";
      var button = Array.prototype.find.call(item.querySelectorAll(".need-actions button[formaction]"), function (b) {
        return /\/(approve|deny)\/$/.test(b.getAttribute("formaction")) &&
          b.getAttribute("formaction").slice(-action.length - 2) === "/" + action + "/";
      });
      if (button && !button.disabled && getComputedStyle(button).display !== "none") button.click();
      else announce("This item cannot be " + (action === "approve" ? "approved" : "denied") + " here.");
      return true;
    }
    return false;
  }

  // Each column keeps the cards a reload would show: a push names its first page
  // (#page-<column>, ``rendering.page_parts``); what the page holds past it goes, and a
  // card of it the page lacks brings the column's first page again. A filtered page
  // keeps its own cards (its socket sends no pages).
  //
  // A push is rendered from the board as it is when it leaves, so its page may already
  // name a card whose own push is a moment behind it: the page waits that moment before
  // fetching. The fetched page is morphed in, so a card the person is dragging (or has
  // focused) stays the same element.
  var REFETCH_AFTER_MS = 1500;

  function missingCards(page, cards) {
    var held = {};
    Array.prototype.forEach.call(cards.querySelectorAll(":scope > .card"), function (card) {
      held[card.dataset.taskId] = true;
    });
    return (page.dataset.numbers || "").split(" ").some(function (n) { return n && !held[n]; });
  }

  function refetchColumn(key) {
    var page = byId("page-" + key), cards = byId("cards-" + key);
    if (!page || !cards || currentFilter() || !missingCards(page, cards)) return;
    cards.dataset.refetching = "1";
    htmx.ajax("GET", page.dataset.url, { source: cards, target: cards, swap: "innerMorph" })
      .finally(function () { delete cards.dataset.refetching; });
  }

  function trimColumns() {
    if (currentFilter()) return;
    document.querySelectorAll("#board .column-page").forEach(function (page) {
      var cards = byId("cards-" + page.dataset.pageOf);
      if (!cards) return;
      var keep = {};
      (page.dataset.numbers || "").split(" ").forEach(function (n) { if (n) keep[n] = true; });
      Array.prototype.forEach.call(cards.querySelectorAll(":scope > .card"), function (card) {
        if (!keep[card.dataset.taskId]) card.remove();
      });
      if (missingCards(page, cards) && !cards.dataset.refetching) {
        cards.dataset.refetching = "waiting";
        var key = page.dataset.pageOf;
        setTimeout(function () {
          delete cards.dataset.refetching;
          refetchColumn(key);
        }, REFETCH_AFTER_MS);
      }
    });
  }

  // A held call's countdown to the board's own answer ("2:41"), a wait as a duration.
  function showClocks() {
    var now = Date.now();
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.getAttribute("datetime")) - now) / 1000);
      var text = left <= 0 ? "a moment" : Math.floor(left / 60) + ":" + ("0" + (left % 60)).slice(-2);
      if (el.textContent !== text) el.textContent = text;
    });
    document.querySelectorAll("#needs time[data-since]").forEach(function (el) {
      var waited = Math.max(0, Math.floor((now - Date.parse(el.getAttribute("datetime"))) / 1000));
      var text;
      if (waited < 60) text = waited + " s";
      else if (waited < 3600) text = Math.floor(waited / 60) + " min";
      else if (waited < 86400) text = Math.floor(waited / 3600) + " h " + Math.floor((waited % 3600) / 60) + " min";
      else text = Math.floor(waited / 86400) + " d";
      if (el.textContent !== text) el.textContent = text;
    });
  }

  // ---- Shortcut keys (listed in the "?" help) -------------------------------------------

  function typing(el) {
    return !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  function openHelp() {
    var help = byId("shortcuts");
    if (help && !help.open) help.showModal();
  }

  function focusFirstApproval() {
    var buttons = Array.prototype.filter.call(
      document.querySelectorAll("#needs [data-need] .need-actions button, #needs [data-need] .need-actions .button"), shown);
    if (buttons.length) buttons[0].focus();
    else announce("Nothing waits for you.");
  }

  function onKey(event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (document.querySelector("dialog:modal")) return;
    // Escape closes the open task's panel from anywhere in it, a field of it too (its
    // answer may leave the focus in one).
    if (event.key === "Escape" && target.closest && target.closest("#detail")) {
      if (closeDetail()) event.preventDefault();
      return;
    }
    if (typing(target)) return;
    if (target.closest && target.closest("#move-menu")) return;
    if (board() && stripKey(event)) { event.preventDefault(); return; }
    var card = target.closest && target.closest("#board .card");
    var key = event.key;
    if (card) {
      if (key === "ArrowDown") focusNextCard(card, 1);
      else if (key === "ArrowUp") focusNextCard(card, -1);
      else if (key === "ArrowRight") focusNextColumn(card, 1);
      else if (key === "ArrowLeft") focusNextColumn(card, -1);
      else if (key === "m" || key === "M") {
        var button = card.querySelector("[data-move-menu]");
        if (!shown(button)) return;
        openMoveMenu(button);
      } else card = null;
      if (card) { event.preventDefault(); return; }
    }
    if (key === "/") {
      var search = byId("search");
      if (search) {
        event.preventDefault();
        // On a phone the search box sits in the header's menu: open it first.
        if (!shown(search)) openMenu(true);
        search.focus();
        search.select();
      }
    }
    else if (key === "Escape") { if (closeDetail()) event.preventDefault(); }
    else if (key === "?") { event.preventDefault(); openHelp(); }
    else if (key === "a" || key === "A") { event.preventDefault(); focusFirstApproval(); }
  }

  // ---- The socket ---------------------------------------------------------------------

  // Registered when this script runs, before htmx (loaded after it) opens the socket,
  // on document because the extension's events bubble up from the socket's element.
  // Every socket's element says whether it is connected (data-socket: live / down).
  document.addEventListener("htmx:ws:after:connection", function (event) {
    if (event.target && event.target.dataset) event.target.dataset.socket = "live";
  });
  document.addEventListener("htmx:ws:close", function (event) {
    if (event.target && event.target.dataset) event.target.dataset.socket = "down";
  });
  // The board's own socket (#board-socket); the header's inbox count has one of its own.
  function boardSocket(event) { return event.target.id === "board-socket"; }
  document.addEventListener("htmx:ws:before:connection", function (event) {
    if (boardSocket(event)) event.detail.connection.url = socketUrl();
  });
  document.addEventListener("htmx:ws:after:connection", function (event) {
    if (boardSocket(event)) setLive("live");
  });
  // A socket swapped out for new filters ("removed") is no loss: its successor is opening.
  document.addEventListener("htmx:ws:close", function (event) {
    if (boardSocket(event) && event.detail.reason !== "removed") setLive("down");
  });
  // A pushed "Needs you" list (the board's strip, the inbox) replaces its items: the note a
  // person is typing survives by itself (hx-preserve, need.html). The card the panel shows is
  // noted here: a push that replaces or removes it refreshes the panel.
  var openCard = null;
  document.addEventListener("htmx:ws:before:message:incoming", function (event) {
    rememberFocus();
    var open = document.querySelector("#detail [data-detail-task]");
    openCard = open ? { number: open.dataset.detailTask, card: byId("task-" + open.dataset.detailTask) } : null;
  });

  document.addEventListener("htmx:ws:after:message:incoming", function (event) {
    restoreFocus();
    if (!boardSocket(event)) return;
    // A visible-again tab reconnects without before:connection, so keep the URL current.
    event.detail.connection.url = socketUrl();
    // Before the columns are trimmed: only a card this push replaced or removed counts.
    var seen = openCard;
    openCard = null;
    var open = document.querySelector("#detail [data-detail-task]");
    if (seen && open && open.dataset.detailTask === seen.number && byId("task-" + seen.number) !== seen.card) {
      showTask(open.dataset.taskUrl, false);
    }
    trimColumns();
    syncTabCounts();
    collectEvents();
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

  // A phone's header keeps the board's name, progress and state; the rest opens from "Menu".
  function setUpMenu() {
    var toggle = document.querySelector("[data-board-menu]");
    var tools = byId("board-tools");
    if (!toggle || !tools) return;
    toggle.addEventListener("click", function () {
      openMenu(toggle.getAttribute("aria-expanded") !== "true");
    });
  }

  function openMenu(open) {
    var toggle = document.querySelector("[data-board-menu]");
    var tools = byId("board-tools");
    if (!toggle || !tools) return;
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    tools.classList.toggle("board-tools--open", open);
  }

  function start() {
    setUpDetail();
    var el = board();
    if (!el) return;
    setUpMenu();
    new MutationObserver(function () { showLeases(); showClocks(); syncTabCounts(); applyStrip(); })
      .observe(el, { childList: true, subtree: true });
    setUpStrip();
    setUpFilters();
    setUpTabs();
    setUpDragAndDrop();
    setUpMoveMenu();
    document.addEventListener("keydown", onKey);
    lastProgress = progressText();
    setInterval(function () { showLeases(); showClocks(); }, 1000);
    showLeases();
    showClocks();
    window.addEventListener("pageshow", function (event) { if (event.persisted) location.reload(); });
  }

  // Copy buttons (the Connect page's snippets): the snippet's text, as shown.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var code = document.querySelector('[data-snippet="' + button.dataset.copy + '"]');
    if (!code || !navigator.clipboard) return;
    navigator.clipboard.writeText(code.textContent).then(function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    }, function () { button.textContent = "Select and copy"; });
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
