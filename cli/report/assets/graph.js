// The graph page of `halfway graph MODEL -o page.html`: draws the laid-out program from the JSON
// beside this script, then pan (drag), zoom (wheel, + / - / 0, the buttons), search (ops by type,
// ONNX name or tensor name; Enter steps through the matches) and a details panel on click.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var MARGIN = 40, MIN_ZOOM = 0.01, MAX_ZOOM = 8, LABELS_FROM = 0.55;
  var svg = document.getElementById("canvas");
  var viewport = document.getElementById("viewport");
  var view = { x: 0, y: 0, k: 1 };
  var nodes = {}, nodeElements = {}, edgeElements = [];
  var matches = [], current = -1, selected = null;

  function make(name, attrs, parent) {
    var element = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (key) { element.setAttribute(key, attrs[key]); });
    if (parent) parent.appendChild(element);
    return element;
  }

  function drawNode(node, parent) {
    var g = make("g", { "class": "node " + node.kind + (node.fused ? " fused" : ""), "data-id": node.id }, parent);
    var round = node.kind === "input" || node.kind === "output" ? node.h / 2 : 8;
    make("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: round,
                   fill: data.styles[node.kind][0] }, g);
    var step = node.h / (node.lines.length + 1);
    var text = make("text", {}, g);
    node.lines.forEach(function (line, i) {
      var span = make("tspan", { x: node.x + node.w / 2, y: node.y + step * (i + 1) + 4 }, text);
      if (i === 0) span.setAttribute("class", "main");
      span.textContent = line;
    });
    g.addEventListener("click", function (event) { event.stopPropagation(); select(node.id, false); });
    nodeElements[node.id] = g;
  }

  function drawEdge(edge, index) {
    var path = make("path", { "class": "edge", d: edge.d, "marker-end": "url(#arrow)" },
                    document.getElementById("edges"));
    var hit = make("path", { "class": "edge-hit", d: edge.d, "data-var": edge.var }, document.getElementById("edges"));
    hit.addEventListener("click", function (event) { event.stopPropagation(); showEdge(edge, index); });
    edgeElements.push(path);
    if (edge.label) {
      var label = make("text", { "class": "label", x: edge.lx, y: edge.ly }, document.getElementById("labels"));
      label.textContent = edge.label;
    }
  }

  function draw() {
    document.getElementById("summary").textContent = data.summary + ". " + "Drag to pan, scroll to zoom, " +
      "search by op type, ONNX op or tensor name; click an op or an edge for its details.";
    var legend = document.getElementById("legend"), seen = {};
    Object.keys(data.styles).forEach(function (kind) {
      var style = data.styles[kind];
      if (seen[style[1]]) return;
      seen[style[1]] = true;
      var item = document.createElement("span");
      item.style.setProperty("--fill", style[0]);
      item.textContent = style[1];
      legend.appendChild(item);
    });
    var fused = document.createElement("span");
    fused.className = "fused";
    fused.textContent = "⚡ fused op";
    legend.appendChild(fused);
    data.edges.forEach(drawEdge);
    var parent = document.getElementById("nodes");
    data.nodes.forEach(function (node) { nodes[node.id] = node; drawNode(node, parent); });
  }

  // -- pan and zoom ---------------------------------------------------------------------------
  function apply() {
    viewport.setAttribute("transform", "translate(" + view.x.toFixed(2) + "," + view.y.toFixed(2) + ") scale(" +
                          view.k.toFixed(5) + ")");
    svg.classList.toggle("far", view.k < LABELS_FROM);
  }

  function zoomAt(factor, cx, cy) {
    var k = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, view.k * factor));
    view.x = cx - (cx - view.x) * k / view.k;
    view.y = cy - (cy - view.y) * k / view.k;
    view.k = k;
    apply();
  }

  function zoomCentre(factor) {
    zoomAt(factor, svg.clientWidth / 2, svg.clientHeight / 2);
  }

  function fit() {
    var w = data.width + 2 * MARGIN, h = data.height + 2 * MARGIN;
    view.k = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, Math.min(svg.clientWidth / w, svg.clientHeight / h, 1.5)));
    view.x = (svg.clientWidth - data.width * view.k) / 2;
    view.y = (svg.clientHeight - data.height * view.k) / 2;
    apply();
  }

  // the whole graph, or when that would be too small to read, its top at the width that fits
  function start() {
    fit();
    if (view.k >= LABELS_FROM) return;
    view.k = Math.min(1, Math.max(view.k, svg.clientWidth / (data.width + 2 * MARGIN)));
    view.x = (svg.clientWidth - data.width * view.k) / 2;
    view.y = MARGIN;
    apply();
  }

  function centreOn(node) {
    view.k = Math.max(view.k, 0.9);
    view.x = svg.clientWidth / 2 - (node.x + node.w / 2) * view.k;
    view.y = svg.clientHeight / 2 - (node.y + node.h / 2) * view.k;
    apply();
  }

  function listenPan() {
    var start = null;
    svg.addEventListener("pointerdown", function (event) {
      start = { x: event.clientX - view.x, y: event.clientY - view.y };
      svg.classList.add("panning");
    });
    window.addEventListener("pointermove", function (event) {
      if (!start) return;
      view.x = event.clientX - start.x;
      view.y = event.clientY - start.y;
      apply();
    });
    window.addEventListener("pointerup", function () { start = null; svg.classList.remove("panning"); });
    svg.addEventListener("wheel", function (event) {
      event.preventDefault();
      var box = svg.getBoundingClientRect();
      zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
    }, { passive: false });
  }

  // -- search ---------------------------------------------------------------------------------
  // ops whose type or ONNX names match come first, then those whose tensors do
  function rank(node, query) {
    if (node.lines.join(" ").toLowerCase().indexOf(query) >= 0) return 0;
    var names = node.inputs.concat(node.outputs).map(function (slot) { return slot[1]; });
    return (node.detail + " " + names.join(" ")).toLowerCase().indexOf(query) >= 0 ? 1 : -1;
  }

  function search(query) {
    var results = document.getElementById("results");
    results.textContent = "";
    results.classList.remove("closed");
    data.nodes.forEach(function (node) { nodeElements[node.id].classList.remove("match"); });
    query = query.trim().toLowerCase();
    var ranked = [[], []];
    if (query) data.nodes.forEach(function (node) { var r = rank(node, query); if (r >= 0) ranked[r].push(node); });
    matches = ranked[0].concat(ranked[1]);
    current = -1;
    matches.forEach(function (node, i) {
      nodeElements[node.id].classList.add("match");
      if (i >= 100) return;
      var item = document.createElement("li");
      item.textContent = node.lines.join(" · ") + "  —  " + node.detail;
      item.setAttribute("data-id", node.id);
      item.addEventListener("click", function () {
        current = i;
        results.classList.add("closed");
        select(node.id, true);
      });
      results.appendChild(item);
    });
    document.getElementById("count").textContent = query ? matches.length + " found" : "";
  }

  function step() {
    if (!matches.length) return;
    current = (current + 1) % matches.length;
    select(matches[current].id, true);
  }

  // -- details --------------------------------------------------------------------------------
  function table(className, header, rows) {
    var t = document.createElement("table");
    t.className = className;
    if (header) {
      var head = t.insertRow();
      header.forEach(function (text) {
        var th = document.createElement("th");
        th.textContent = text;
        head.appendChild(th);
      });
    }
    rows.forEach(function (cells) {
      var row = t.insertRow();
      cells.forEach(function (text, i) {
        var cell = document.createElement(i === 0 && !header ? "th" : "td");
        cell.textContent = text;
        row.appendChild(cell);
      });
    });
    return t;
  }

  function heading(panel, tag, text) {
    var element = document.createElement(tag);
    element.textContent = text;
    panel.appendChild(element);
  }

  function tensorRows(slots) {
    return slots.map(function (s) { return [s[0], s[1], s[2], JSON.stringify(s[3])]; });
  }

  function showNode(node) {
    var panel = document.getElementById("details");
    panel.textContent = "";
    heading(panel, "h2", node.lines[0]);
    heading(panel, "p", node.kind + (node.fused ? ", fused" : "") + " — " + node.detail);
    if (node.attrs.length) {
      heading(panel, "h3", "Attributes");
      panel.appendChild(table("attrs", null, node.attrs));
    }
    [["Inputs", "inputs", node.inputs], ["Outputs", "outputs", node.outputs]].forEach(function (part) {
      if (!part[2].length) return;
      heading(panel, "h3", part[0]);
      panel.appendChild(table(part[1], ["slot", "tensor", "dtype", "shape"], tensorRows(part[2])));
    });
  }

  function showEdge(edge, index) {
    var panel = document.getElementById("details");
    panel.textContent = "";
    heading(panel, "h2", edge.var);
    panel.appendChild(table("tensor", null, [["tensor", edge.tensor], ["from", nodes[edge.s].lines[0]],
                                              ["to", nodes[edge.t].lines[0]]]));
    highlight(function (e, i) { return i === index; });
  }

  function highlight(test) {
    data.edges.forEach(function (edge, i) { edgeElements[i].classList.toggle("on", test(edge, i)); });
  }

  function select(id, centre) {
    if (selected) nodeElements[selected].classList.remove("selected");
    selected = id;
    nodeElements[id].classList.add("selected");
    highlight(function (edge) { return edge.s === id || edge.t === id; });
    showNode(nodes[id]);
    if (centre) centreOn(nodes[id]);
  }

  function listen() {
    listenPan();
    document.getElementById("zoom-in").addEventListener("click", function () { zoomCentre(1.25); });
    document.getElementById("zoom-out").addEventListener("click", function () { zoomCentre(0.8); });
    document.getElementById("fit").addEventListener("click", fit);
    var box = document.getElementById("search");
    box.addEventListener("input", function () { search(box.value); });
    box.addEventListener("focus", function () { document.getElementById("results").classList.remove("closed"); });
    box.addEventListener("keydown", function (event) {
      if (event.key === "Enter") { document.getElementById("results").classList.add("closed"); step(); }
      if (event.key === "Escape") { box.value = ""; search(""); }
    });
    window.addEventListener("keydown", function (event) {
      if (event.target === box) return;
      if (event.key === "+" || event.key === "=") zoomCentre(1.25);
      if (event.key === "-") zoomCentre(0.8);
      if (event.key === "0") fit();
      if (event.key === "/") { event.preventDefault(); box.focus(); }
    });
  }

  draw();
  listen();
  start();
})();
