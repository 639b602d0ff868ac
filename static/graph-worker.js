// A worker of the graph page (static/graph.js): lays out the parts it is sent with dagre,
// off the page's thread, so a big graph is laid out on every core and the page stays
// responsive while a push re-lays it out.
importScripts("vendor/dagre-3.1.3/dagre.min.js", "graph-layout.js");
postMessage({ ready: true });

onmessage = function (event) {
  var job = event.data;
  var laid = job.parts.map(function (part) { return graphLayout.layoutPart(part, job.grouped, job.vertical); });
  postMessage({ id: job.id, laid: laid });
};
