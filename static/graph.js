// The dependency graph page (issue 16): lays graph.json out left to right with dagre
// (vendored), draws it as SVG, opens a task's details beside it (the board's panel code,
// app.js), and follows the board's socket: a push with events fetches the graph again;
// colours and classes change in place, and a graph whose nodes or edges changed is laid
// out again.
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var L = window.graphLayout;    // static/graph-layout.js
  var NODE_W = L.NODE_W;
  var NODE_H = L.NODE_H;
  var SUBJECT_CHARS = 24;
  var PAD = 12;                  // around the drawing
  var STATUS_NAMES = { pending: "pending", in_progress: "in progress", blocked: "blocked" };

  function svg(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }

  function round(n) { return Math.round(n * 10) / 10; }

  // ---- Layout: the parts shared out among the workers, packed here ---------------------

  // Up to one worker a core (at most four), started at once so that dagre loads while
  // graph.json is fetched. Each has ``ready``, a promise that fails with the worker.
  function startWorkers(url) {
    var workers = [];
    var count = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 2));
    try {
      for (var i = 0; i < count; i++) workers.push(new Worker(url));
    } catch (e) {
      workers.forEach(function (w) { w.terminate(); });
      return [];
    }
    workers.forEach(function (worker) {
      worker.ready = new Promise(function (resolve, reject) {
        worker.addEventListener("message", function (event) { if (event.data.ready) resolve(); });
        worker.addEventListener("error", reject);
      });
      worker.ready.catch(function () { /* the layout falls back to the page's thread */ });
    });
    return workers;
  }

  var jobs = 0;

  function ask(worker, parts, grouped, vertical) {
    var id = ++jobs;
    return worker.ready.then(function () {
      return new Promise(function (resolve, reject) {
        function done(event) {
          if (event.data.id !== id) return;
          worker.removeEventListener("message", done);
          worker.removeEventListener("error", reject);
          resolve(event.data.laid);
        }
        worker.addEventListener("message", done);
        worker.addEventListener("error", reject);
        worker.postMessage({ id: id, parts: parts, grouped: grouped, vertical: vertical });
      });
    });
  }

  // Each worker takes the biggest part left to the one with the least work so far.
  function layoutOnWorkers(workers, big, grouped, vertical) {
    var shares = workers.map(function () { return { parts: [], load: 0 }; });
    big.slice().sort(function (a, b) { return b.ids.length - a.ids.length; }).forEach(function (part) {
      var least = shares.reduce(function (a, b) { return b.load < a.load ? b : a; });
      least.parts.push(part);
      least.load += part.ids.length + part.edges.length;
    });
    return Promise.all(shares.map(function (share, i) {
      return share.parts.length ? ask(workers[i], share.parts, grouped, vertical) : [];
    })).then(function (lists) { return [].concat.apply([], lists); });
  }

  // Resolves with the packed layout: {nodes, edges, groups, width, height}; chains run
  // down the page when ``vertical`` (a canvas taller than wide: a phone held upright).
  function layout(data, grouped, rowWidth, workers, vertical) {
    var big = [];
    var singles = [];
    L.parts(data.nodes, data.edges, grouped).forEach(function (part) {
      if (L.single(part)) singles.push(part.ids[0]);
      else big.push(part);
    });
    function here() {
      return big.map(function (part) { return L.layoutPart(part, grouped, vertical); });
    }
    var laid = workers.length && big.length
      ? layoutOnWorkers(workers, big, grouped, vertical).catch(function () {
        workers.splice(0).forEach(function (w) { w.terminate(); });
        return here();
      })
      : Promise.resolve().then(here);
    return laid.then(function (list) { return L.pack(list, singles, rowWidth); });
  }

  // ---- Drawing ------------------------------------------------------------------------

  function statusName(node) {
    return node.column === "completed" ? node.status.replace("_", " ") : STATUS_NAMES[node.column];
  }

  function nodeLabel(node, critical) {
    var words = ["#" + node.id + " " + node.subject, statusName(node)];
    if (node.stuck) words.push("stuck");
    if (node.attention) words.push("needs attention");
    if (node.approval === "requested") words.push("awaiting approval");
    else if (node.approval === "required") words.push("needs approval before it is claimed");
    if (critical) words.push("on the critical path");
    if (node.owner) words.push("owner " + node.owner);
    return words.join(", ");
  }

  function shortText(node) {
    var subject = node.subject.length > SUBJECT_CHARS ? node.subject.slice(0, SUBJECT_CHARS - 1) + "…" : node.subject;
    return "#" + node.id + " " + subject;
  }

  function titleText(node) {
    return "#" + node.id + " " + node.subject + (node.owner ? " (" + node.owner + ")" : "");
  }

  function nodeClass(node, critical, state) {
    var names = ["node", "col-" + node.column, "status-" + node.status];
    if (node.stuck) names.push("stuck");
    if (node.attention) names.push("attention");
    if (node.approval) names.push("approval-" + node.approval);
    if (critical) names.push("critical");
    if (state.selected === node.id) names.push("selected");
    if (state.around === node.id) names.push("around");
    return names.join(" ");
  }

  // A path of one task is no chain: nothing is marked.
  function criticalNodes(data) {
    var set = {};
    if (data.critical.length > 1) data.critical.forEach(function (id) { set[id] = true; });
    return set;
  }

  function criticalEdges(data) {
    var set = {};
    for (var i = 1; i < data.critical.length; i++) set[data.critical[i - 1] + ">" + data.critical[i]] = true;
    return set;
  }

  // A finished blocker's edge is met (completed) or a dead end (failed, cancelled).
  function edgeClass(edge, byId, critical) {
    var names = ["edge"];
    var from = byId[edge.from];
    if (from && from.status === "completed") names.push("satisfied");
    else if (from && from.column === "completed") names.push("dead-end");
    if (critical[edge.from + ">" + edge.to]) names.push("critical");
    return names.join(" ");
  }

  function markerFor(className) {
    return "url(#" + (className.indexOf("critical") !== -1 ? "graph-arrow-critical" : "graph-arrow") + ")";
  }

  function pathOf(points) {
    return "M" + points.map(function (p) { return round(p.x) + "," + round(p.y); }).join("L");
  }

  function draw(data, laid, state) {
    var byId = {};
    data.nodes.forEach(function (n) { byId[n.id] = n; });
    var onPath = criticalNodes(data);
    var critical = criticalEdges(data);
    var width = Math.ceil(laid.width + 2 * PAD);
    var height = Math.ceil(laid.height + 2 * PAD);
    var root = svg("svg", {
      id: "graph", "class": "graph", role: "group", viewBox: "0 0 " + width + " " + height,
      "data-width": width, "data-height": height, "aria-describedby": "graph-summary"
    });
    var defs = svg("defs", {}, root);
    ["graph-arrow", "graph-arrow-critical"].forEach(function (id) {
      var marker = svg("marker", {
        id: id, "class": id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerUnits: "userSpaceOnUse",
        markerWidth: 9, markerHeight: 9, orient: "auto-start-reverse"
      }, defs);
      svg("path", { d: "M0,0L10,5L0,10z" }, marker);
    });
    var scene = svg("g", { transform: "translate(" + PAD + "," + PAD + ")" }, root);
    var groupLayer = svg("g", { "class": "groups" }, scene);
    laid.groups.forEach(function (gr) {
      var box = svg("g", { "class": "group", "data-parent": gr.id }, groupLayer);
      svg("rect", { x: round(gr.x), y: round(gr.y), width: round(gr.width), height: round(gr.height), rx: 8 }, box);
      var parent = byId[gr.id];
      var text = svg("text", { x: round(gr.x + 6), y: round(gr.y + 4) }, box);
      text.textContent = "children of " + (parent ? shortText(parent) : "#" + gr.id);
    });
    var edgeLayer = svg("g", { "class": "edges" }, scene);
    laid.edges.forEach(function (e) {
      var className = edgeClass(e, byId, critical);
      svg("path", {
        "class": className, d: pathOf(e.points), "data-from": e.from, "data-to": e.to,
        "marker-end": markerFor(className)
      }, edgeLayer);
    });
    var nodeLayer = svg("g", { "class": "nodes" }, scene);
    laid.nodes.forEach(function (p) {
      var node = byId[p.id];
      var item = svg("g", {
        "class": nodeClass(node, onPath[node.id], state), "data-task": node.id,
        transform: "translate(" + round(p.x) + "," + round(p.y) + ")",
        tabindex: 0, role: "button", "aria-label": nodeLabel(node, onPath[node.id])
      }, nodeLayer);
      svg("title", {}, item).textContent = titleText(node);
      svg("rect", { width: NODE_W, height: NODE_H, rx: 6 }, item);
      svg("text", { x: 10, y: NODE_H / 2 }, item).textContent = shortText(node);
      var badge = svg("g", { "class": "badge", transform: "translate(" + (NODE_W - 4) + ",4)" }, item);
      svg("circle", { r: 7 }, badge);
      svg("text", { "text-anchor": "middle", y: 0.5 }, badge).textContent = "!";
    });
    root.dataset.nodes = String(laid.nodes.length);
    root.dataset.edges = String(laid.edges.length);
    return root;
  }

  // Same nodes and edges (and parents, when grouped): only colours and labels change.
  function restyle(root, data, state) {
    var byId = {};
    data.nodes.forEach(function (n) { byId[n.id] = n; });
    var onPath = criticalNodes(data);
    var critical = criticalEdges(data);
    Array.prototype.forEach.call(root.querySelectorAll(".node[data-task]"), function (item) {
      var node = byId[item.dataset.task];
      if (!node) return;
      item.setAttribute("class", nodeClass(node, onPath[node.id], state));
      item.setAttribute("aria-label", nodeLabel(node, onPath[node.id]));
      item.querySelector("title").textContent = titleText(node);
      item.querySelector("text").textContent = shortText(node);
    });
    Array.prototype.forEach.call(root.querySelectorAll(".edge[data-from]"), function (path) {
      var className = edgeClass({ from: path.dataset.from, to: path.dataset.to }, byId, critical);
      path.setAttribute("class", className);
      path.setAttribute("marker-end", markerFor(className));
    });
    Array.prototype.forEach.call(root.querySelectorAll(".group[data-parent]"), function (box) {
      var parent = byId[box.dataset.parent];
      if (parent) box.querySelector("text").textContent = "children of " + shortText(parent);
    });
  }

  function shapeOf(data, grouped) {
    var parts = data.nodes.map(function (n) { return n.id + (grouped && n.parentId ? "^" + n.parentId : ""); });
    return parts.join(",") + "|" + data.edges.map(function (e) { return e.from + ">" + e.to; }).join(",");
  }

  // ---- The page -----------------------------------------------------------------------

  function start() {
    var page = document.querySelector("main.graph-page");
    if (!page) return;
    var canvas = document.getElementById("graph-canvas");
    var summary = document.getElementById("graph-summary");
    var error = document.getElementById("graph-error");
    var live = document.getElementById("graph-live");
    var detail = document.getElementById("detail");
    var groupsBox = document.getElementById("graph-groups");
    var placeholder = detail.innerHTML;
    var state = { selected: null, around: page.dataset.task || null };
    var data = null;
    var shape = "";
    var zoom = 1;
    var fetchedAt = 0;
    var workers = startWorkers(page.dataset.worker);

    try { groupsBox.checked = localStorage.getItem("graph-groups") === "1"; } catch (e) { /* storage off */ }

    var zoomed = false;  // by the person: a new layout keeps their zoom, else it is fitted
    function setZoom(value) {
      var root = document.getElementById("graph");
      zoom = Math.min(2, Math.max(0.02, value));
      if (!root) return;
      root.setAttribute("width", Math.round(root.dataset.width * zoom));
      root.setAttribute("height", Math.round(root.dataset.height * zoom));
      document.getElementById("graph-zoom-level").textContent = Math.round(zoom * 100) + "%";
    }

    // Every node inside the canvas: the drawing at the largest zoom (up to 100%) that fits.
    function fit() {
      var root = document.getElementById("graph");
      if (!root) return;
      var room = Math.min((canvas.clientWidth - 4) / root.dataset.width, (canvas.clientHeight - 4) / root.dataset.height);
      setZoom(Math.min(1, room));
      canvas.scrollTo(0, 0);
    }

    // The full subject of the node under the pointer or the focus (the drawn label is cut).
    var tip = document.getElementById("graph-tip");
    function showTip(item) {
      var node = data && item && data.nodes.filter(function (n) { return n.id === item.dataset.task; })[0];
      if (!node) { tip.hidden = true; return; }
      tip.textContent = nodeLabel(node, item.classList.contains("critical"));
      tip.hidden = false;
      var box = item.getBoundingClientRect();
      var frame = canvas.parentNode.getBoundingClientRect();
      var left = Math.max(0, Math.min(box.left - frame.left, frame.width - tip.offsetWidth));
      var top = box.bottom - frame.top + 4;
      if (top + tip.offsetHeight > frame.height) top = Math.max(0, box.top - frame.top - tip.offsetHeight - 4);
      tip.style.left = left + "px";
      tip.style.top = top + "px";
    }
    canvas.addEventListener("mouseover", function (event) { showTip(event.target.closest(".node[data-task]")); });
    canvas.addEventListener("mouseleave", function () { if (!canvas.contains(document.activeElement)) tip.hidden = true; });
    canvas.addEventListener("focusin", function (event) { showTip(event.target.closest(".node[data-task]")); });
    canvas.addEventListener("focusout", function () { tip.hidden = true; });
    canvas.addEventListener("scroll", function () { tip.hidden = true; });

    function describe() {
      var open = data.nodes.filter(function (n) { return n.column !== "completed"; }).length;
      var text = data.nodes.length + (data.nodes.length === 1 ? " task" : " tasks") + " (" + open + " open), " +
        data.edges.length + (data.edges.length === 1 ? " dependency" : " dependencies") + ". ";
      var path = data.critical;
      if (path.length > 10) path = path.slice(0, 4).concat(["…"], path.slice(-4));
      text += data.critical.length > 1
        ? "Critical path of unfinished work (" + data.critical.length + " tasks): #" + path.join(" → #").replace("#…", "…") + "."
        : "No chain of unfinished work.";
      if (data.truncated) text += " Only the first " + data.nodes.length + " tasks are shown.";
      summary.textContent = text;
      var root = document.getElementById("graph");
      if (root) root.setAttribute("aria-label", "Dependency graph: " + text);
    }

    // Lays out and draws ``data``; only the newest of overlapping renders is drawn.
    var renders = 0;
    var pending = false;
    function render() {
      var token = ++renders;
      pending = true;
      var drawing = data;
      var grouped = groupsBox.checked;
      var started = performance.now();
      shape = shapeOf(drawing, grouped);
      var vertical = canvas.clientHeight > canvas.clientWidth;
      return layout(drawing, grouped, (canvas.clientWidth - 2 * PAD) / (zoomed ? zoom : 1), workers, vertical).then(function (laid) {
        if (token !== renders) return;
        pending = false;
        var laidOut = performance.now();
        var focused = document.activeElement && document.activeElement.closest && document.activeElement.closest(".node[data-task]");
        var root = draw(drawing, laid, state);
        if (data !== drawing) restyle(root, data, state);  // fetched again meanwhile, same shape
        var old = document.getElementById("graph");
        if (old) canvas.replaceChild(root, old); else canvas.appendChild(root);
        if (zoomed) setZoom(zoom); else fit();
        describe();
        if (focused) {
          var again = root.querySelector('.node[data-task="' + focused.dataset.task + '"]');
          if (again) again.focus({ preventScroll: true });
        }
        root.dataset.fetchedMs = String(Math.round(fetchedAt));
        root.dataset.layoutMs = String(Math.round(laidOut - started));
        root.dataset.drawnMs = String(Math.round(performance.now()));
        var seq = data.seq;
        // Rendered once the browser has styled and painted the new SVG: after the next frame.
        requestAnimationFrame(function () {
          setTimeout(function () {
            root.dataset.renderedMs = String(Math.round(performance.now()));
            root.dataset.seq = String(seq);
          }, 0);
        });
      });
    }

    // New data: the same shape is restyled in place (or by the render under way).
    function apply(next) {
      data = next;
      if (shapeOf(data, groupsBox.checked) !== shape) return render();
      var root = document.getElementById("graph");
      if (root && !pending) {
        restyle(root, data, state);
        describe();
        root.dataset.seq = String(data.seq);
      }
      return Promise.resolve();
    }

    var fetching = false;
    var again = false;
    function refresh() {
      if (fetching) { again = true; return Promise.resolve(); }
      fetching = true;
      // The URL the page preloads (graph.html): the first fetch takes that answer.
      return fetch(page.dataset.json, { credentials: "same-origin" })
        .then(function (response) {
          return response.json().then(function (body) {
            if (!response.ok) throw new Error((body.error && body.error.message) || "HTTP " + response.status);
            return body;
          });
        })
        .then(function (body) {
          fetchedAt = performance.now();
          error.textContent = "";
          return apply(body);
        })
        .catch(function (failure) {
          error.textContent = "The graph could not be shown: " + failure.message;
        })
        .finally(function () {
          fetching = false;
          if (again) { again = false; refresh(); }
        });
    }

    // Pushes come in bursts (a batch, a completion that unblocks others): one fetch each.
    var timer = null;
    function soon() {
      if (timer) return;
      timer = setTimeout(function () { timer = null; refresh(); }, 80);
    }

    // ---- The detail panel ----

    function select(id) {
      state.selected = id;
      Array.prototype.forEach.call(canvas.querySelectorAll(".node.selected"), function (item) {
        item.classList.remove("selected");
      });
      var item = id && canvas.querySelector('.node[data-task="' + id + '"]');
      if (item) item.classList.add("selected");
    }

    // The board's panel code shows it (app.js, kanban.showTask), from the page's address
    // of a task (data-task-url, with {number} for the node's number).
    function open(id) {
      select(id);
      kanban.showTask(page.dataset.taskUrl.replace("{number}", encodeURIComponent(id)), true);
    }

    canvas.addEventListener("click", function (event) {
      var item = event.target.closest(".node[data-task]");
      if (item) open(item.dataset.task);
    });
    canvas.addEventListener("keydown", function (event) {
      var item = event.target.closest && event.target.closest(".node[data-task]");
      if (!item || (event.key !== "Enter" && event.key !== " ")) return;
      event.preventDefault();
      open(item.dataset.task);
    });
    document.getElementById("graph-close").addEventListener("click", function () {
      var open = detail.querySelector("[data-detail-task]");
      detail.innerHTML = placeholder;
      select(null);
      var item = open && canvas.querySelector('.node[data-task="' + open.dataset.detailTask + '"]');
      if (item) item.focus();
    });
    // A link or form in the panel that shows another task: mark that one in the graph.
    new MutationObserver(function () {
      var open = detail.querySelector("[data-detail-task]");
      if (open && open.dataset.detailTask !== state.selected) select(open.dataset.detailTask);
    }).observe(detail, { childList: true });

    groupsBox.addEventListener("change", function () {
      try { localStorage.setItem("graph-groups", groupsBox.checked ? "1" : "0"); } catch (e) { /* storage off */ }
      if (data) render();
    });
    document.getElementById("graph-zoom-out").addEventListener("click", function () { zoomed = true; setZoom(zoom / 1.25); });
    document.getElementById("graph-zoom-in").addEventListener("click", function () { zoomed = true; setZoom(zoom * 1.25); });
    document.getElementById("graph-zoom-fit").addEventListener("click", function () { zoomed = false; fit(); });

    // ---- Live: the board's socket (hx-ws, #graph-socket) says something happened ----
    // Its pushes are the board's fragments (cards, the strip, #board-seq, #board-events),
    // never swapped into this page, which has none of their targets: each is parsed into an
    // inert <template> (nothing in it runs or loads) and read as the page would read it.

    var socket = document.getElementById("graph-socket");
    var seq = socket.dataset.seq;
    var socketPath = socket.getAttribute("hx-ws:connect").split("?")[0];
    var opened = false;
    function setLive(up) {
      live.dataset.state = up ? "live" : "down";
      live.textContent = up ? "● live" : "○ reconnecting…";
    }
    function mine(event) { return event.target === socket; }
    document.addEventListener("htmx:ws:before:connection", function (event) {
      if (mine(event)) event.detail.connection.url = kanban.socketAddress(socketPath + "?seq=" + seq);
    });
    document.addEventListener("htmx:ws:after:connection", function (event) {
      if (!mine(event)) return;
      setLive(true);
      if (opened) soon();  // back after a break: what changed meanwhile
      opened = true;
    });
    document.addEventListener("htmx:ws:close", function (event) { if (mine(event)) setLive(false); });
    if (socket.dataset.socket === "live") { setLive(true); opened = true; }  // opened before this ran
    document.addEventListener("htmx:ws:before:message:incoming", function (event) {
      if (!mine(event)) return;
      event.detail.cancelled = true;
      var text = event.detail.message && event.detail.message.data;
      if (typeof text !== "string") return;
      var push = document.createElement("template");
      push.innerHTML = text;
      var marker = push.content.getElementById("board-seq");
      var pushedSeq = marker ? marker.dataset.seq : "";
      if (pushedSeq) {
        seq = pushedSeq;
        event.detail.connection.url = kanban.socketAddress(socketPath + "?seq=" + seq);
      }
      var behind = pushedSeq && data && +pushedSeq > data.seq;
      if (behind || push.content.querySelector("#board-events li[data-seq]")) soon();
      var shown = detail.querySelector("[data-detail-task]");
      if (shown && push.content.getElementById("task-" + shown.dataset.detailTask)) {
        kanban.showTask(shown.dataset.taskUrl, false);
      }
    });

    refresh();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
