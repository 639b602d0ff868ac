// The dependency graph's layout, left to right, by dagre (static/vendor/dagre-3.1.3):
// used by the graph page's workers (static/graph-worker.js) and by the page itself when
// it has none. The graph is cut into its connected parts, each laid out on its own
// (dagre's cost grows faster than the size of what it lays out, and most boards are many
// small independent pieces of work), then the parts are packed in rows.
(function (scope) {
  "use strict";

  var NODE_W = 210;
  var NODE_H = 30;
  var GAP = 48;           // between laid-out parts
  var SINGLE_GAP = 16;    // between tasks that wait on nothing and block nothing
  var GROUP_LABEL = 16;   // room above a parent's group box for its name
  // Up to this many tasks a part gets dagre's best: the network simplex ranker (shortest
  // edges) and its crossing-reduction sweeps. A bigger part is ranked by its tight tree
  // and keeps dagre's first (depth-first) order: about twice as fast (a 100-task part of
  // the benchmark: 105 → 55 ms), for a few more crossings (+20% on a random 300-task part,
  // none on the benchmark's layered work).
  var BEST_MAX = 50;

  // The connected parts: tasks joined by an edge (or, when grouped, by a parent). Each is
  // {ids, edges, parents}, ``parents`` mapping its tasks to their parent's id.
  function parts(nodes, edges, grouped) {
    var up = {};
    function find(x) {
      while (up[x] !== x) { up[x] = up[up[x]]; x = up[x]; }
      return x;
    }
    function add(x) { if (!(x in up)) up[x] = x; }
    function join(a, b) {
      add(a); add(b);
      a = find(a); b = find(b);
      if (a !== b) up[a] = b;
    }
    nodes.forEach(function (n) { add("n" + n.id); });
    edges.forEach(function (e) { join("n" + e.from, "n" + e.to); });
    if (grouped) {
      // A task, its children's group and its own parent's group stay together, so that
      // groups nest.
      nodes.forEach(function (n) {
        join("g" + n.id, "n" + n.id);
        if (n.parentId) join("n" + n.id, "g" + n.parentId);
      });
    }
    var byRoot = {};
    var list = [];
    nodes.forEach(function (n) {
      var root = find("n" + n.id);
      if (!byRoot[root]) { byRoot[root] = { ids: [], edges: [], parents: {} }; list.push(byRoot[root]); }
      byRoot[root].ids.push(n.id);
      if (grouped && n.parentId) byRoot[root].parents[n.id] = n.parentId;
    });
    edges.forEach(function (e) { byRoot[find("n" + e.from)].edges.push(e); });
    return list;
  }

  // One part laid out by dagre: node corners, edge points and group boxes, from (0, 0);
  // left to right, or top to bottom when ``vertical`` (a phone held upright).
  function layoutPart(part, grouped, vertical) {
    var g = new dagre.graphlib.Graph({ compound: grouped, multigraph: false });
    g.setGraph({
      rankdir: vertical ? "TB" : "LR", nodesep: grouped ? 14 + GROUP_LABEL : 14, ranksep: vertical ? 28 : 44,
      marginx: 0, marginy: grouped ? GROUP_LABEL : 0,
      ranker: part.ids.length > BEST_MAX ? "tight-tree" : "network-simplex"
    });
    g.setDefaultEdgeLabel(function () { return {}; });
    part.ids.forEach(function (id) { g.setNode(id, { width: NODE_W, height: NODE_H }); });
    var groups = [];
    if (grouped) {
      part.ids.forEach(function (id) {
        var parent = part.parents[id];
        if (!parent) return;
        var group = "group:" + parent;
        if (!g.hasNode(group)) { g.setNode(group, {}); groups.push(parent); }
        g.setParent(id, group);
      });
      groups.forEach(function (parent) {
        var outer = part.parents[parent];
        if (outer && g.hasNode("group:" + outer)) g.setParent("group:" + parent, "group:" + outer);
      });
    }
    part.edges.forEach(function (e) { g.setEdge(e.from, e.to); });
    dagre.layout(g, { disableOptimalOrderHeuristic: part.ids.length > BEST_MAX });
    var label = g.graph();
    return {
      width: label.width || NODE_W,
      height: label.height || NODE_H,
      nodes: part.ids.map(function (id) {
        var n = g.node(id);
        return { id: id, x: n.x - NODE_W / 2, y: n.y - NODE_H / 2 };
      }),
      edges: part.edges.map(function (e) {
        return { from: e.from, to: e.to, points: g.edge(e.from, e.to).points };
      }),
      groups: groups.map(function (parent) {
        var n = g.node("group:" + parent);
        return {
          id: parent, x: n.x - n.width / 2, y: n.y - n.height / 2 - GROUP_LABEL,
          width: n.width, height: n.height + GROUP_LABEL
        };
      })
    };
  }

  // Whether a part is drawn without dagre: one task, no group box.
  function single(part) {
    return part.ids.length === 1 && !part.parents[part.ids[0]];
  }

  // The laid-out parts, biggest first, in rows ``rowWidth`` wide (or as wide as the
  // widest part); then the single tasks in a grid below, in number order.
  function pack(laid, singles, rowWidth) {
    laid = laid.slice().sort(function (a, b) {
      return b.nodes.length - a.nodes.length || +a.nodes[0].id - +b.nodes[0].id;
    });
    var width = Math.max(rowWidth, NODE_W);
    laid.forEach(function (p) { width = Math.max(width, p.width); });
    var out = { nodes: [], edges: [], groups: [], width: 0, height: 0 };
    function place(p, dx, dy) {
      p.nodes.forEach(function (n) { out.nodes.push({ id: n.id, x: n.x + dx, y: n.y + dy }); });
      p.edges.forEach(function (e) {
        out.edges.push({
          from: e.from, to: e.to,
          points: e.points.map(function (pt) { return { x: pt.x + dx, y: pt.y + dy }; })
        });
      });
      p.groups.forEach(function (gr) {
        out.groups.push({ id: gr.id, x: gr.x + dx, y: gr.y + dy, width: gr.width, height: gr.height });
      });
      out.width = Math.max(out.width, dx + p.width);
      out.height = Math.max(out.height, dy + p.height);
    }
    var x = 0, y = 0, rowHeight = 0;
    laid.forEach(function (p) {
      if (x > 0 && x + p.width > width) { x = 0; y += rowHeight + GAP; rowHeight = 0; }
      place(p, x, y);
      x += p.width + GAP;
      rowHeight = Math.max(rowHeight, p.height);
    });
    var top = laid.length ? y + rowHeight + GAP : 0;
    var perRow = Math.max(1, Math.floor((width + SINGLE_GAP) / (NODE_W + SINGLE_GAP)));
    singles.slice().sort(function (a, b) { return +a - +b; }).forEach(function (id, i) {
      var sx = (i % perRow) * (NODE_W + SINGLE_GAP);
      var sy = top + Math.floor(i / perRow) * (NODE_H + SINGLE_GAP);
      out.nodes.push({ id: id, x: sx, y: sy });
      out.width = Math.max(out.width, sx + NODE_W);
      out.height = Math.max(out.height, sy + NODE_H);
    });
    return out;
  }

  scope.graphLayout = {
    NODE_W: NODE_W, NODE_H: NODE_H, parts: parts, layoutPart: layoutPart, single: single, pack: pack
  };
})(self);
