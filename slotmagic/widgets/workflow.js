// The workflow widget's view: the DAG left to right. The layering and the order within each
// layer come from the model's `placement` (layout.layered_layout); this only turns them into pixels and
// draws. A node with a slot attached is clickable: the kernel switches to that slot.

const SVG = "http://www.w3.org/2000/svg";
const W = 136; // node box
const H = 58;
const GAP_X = 56; // between layers; wider when edges have labels, to hold the longest
const GAP_X_MAX = 112; // a longer label wraps
const CHAR = 7; // px per character of an edge label, a little more than the UI font's widest average
const GAP_Y = 20;
const PAD = 14;
const BACK = 40; // room above or below the nodes for edges that go back
const LINE = 13; // px between the lines of an edge label
const MIN_SCALE = 0.7; // a graph is drawn smaller to fit its output, down to this; past it, it scrolls
// An edge's label sits in the gap right after the layer the edge leaves, centred, never wider
// than the gap: it cannot reach a node. A longer label wraps onto more lines (never cut), and
// labels in one gap that would touch are moved apart.

// `text` in lines of at most `fits` characters, broken between words (a longer word is split).
function wrap(text, fits) {
  const lines = [];
  let line = "";
  for (let word of text.split(/\s+/).filter(Boolean)) {
    while (word.length > fits) {
      if (line) lines.push(line);
      lines.push(word.slice(0, fits));
      word = word.slice(fits);
      line = "";
    }
    if (!line) line = word;
    else if (line.length + 1 + word.length <= fits) line += " " + word;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function s(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attributes || {})) node.setAttribute(k, String(v));
  return node;
}

let instances = 0;

// A branch icon (an SVG, so it needs no font that has a glyph for it).
function branchIcon() {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "11");
  svg.setAttribute("height", "11");
  svg.setAttribute("class", "sm-icon");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", "M5 2.5a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0zM3.5 4v8M14 5.5a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0zM12.5 7c0 3-4 3-9 5M5 13.5a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0z");
  svg.append(path);
  return svg;
}

// A graph wider than its output scrolls sideways under a scrollbar of its own, always drawn
// while there is more to see: the browser's may be hidden until used (overlay scrollbars) or
// not drawn at all (headless). Drag the thumb, click the track, or scroll the graph itself.
function scrollbar(canvas, observers) {
  const track = h("div", "sm-hscroll");
  const thumb = h("div", "sm-hscroll-thumb");
  track.append(thumb);
  track.setAttribute("aria-hidden", "true"); // the graph scrolls by keyboard and wheel too
  const update = () => {
    const { scrollWidth, clientWidth, scrollLeft } = canvas;
    track.hidden = scrollWidth <= clientWidth + 1;
    if (track.hidden) return;
    const width = track.clientWidth;
    const size = Math.max(24, (width * clientWidth) / scrollWidth);
    thumb.style.width = `${size}px`;
    thumb.style.left = `${((width - size) * scrollLeft) / (scrollWidth - clientWidth)}px`;
  };
  canvas.addEventListener("scroll", update);
  thumb.addEventListener("pointerdown", (event) => {
    event.preventDefault();
    thumb.setPointerCapture(event.pointerId);
    const start = { x: event.clientX, left: canvas.scrollLeft };
    const ratio = (canvas.scrollWidth - canvas.clientWidth) / Math.max(1, track.clientWidth - thumb.offsetWidth);
    const move = (e) => (canvas.scrollLeft = start.left + (e.clientX - start.x) * ratio);
    const stop = () => {
      thumb.removeEventListener("pointermove", move);
      thumb.removeEventListener("pointerup", stop);
    };
    thumb.addEventListener("pointermove", move);
    thumb.addEventListener("pointerup", stop);
  });
  track.addEventListener("pointerdown", (event) => {
    if (event.target !== track) return;
    const left = event.clientX < thumb.getBoundingClientRect().left;
    canvas.scrollBy({ left: (left ? -1 : 1) * canvas.clientWidth * 0.9 });
  });
  const observer = new ResizeObserver(update);
  observer.observe(canvas);
  observers.push(observer);
  requestAnimationFrame(update);
  return track;
}

function render({ model, el }) {
  const id = `sm-arrow-${++instances}-${Math.random().toString(36).slice(2, 8)}`;
  const root = h("div", "sm-widget sm-workflow");
  el.append(root);
  const observers = []; // this view's, disconnected at each draw and when the view goes

  function draw() {
    const graph = model.get("graph");
    const layout = model.get("placement");
    const currentSlot = model.get("current_slot");
    const error = model.get("error");
    const status = model.get("status") || {};
    root.replaceChildren();
    for (const observer of observers.splice(0)) observer.disconnect();
    if (!graph || !graph.nodes || !layout || !layout.layers) return;
    const done = graph.nodes.filter((n) => n.status === "done").length;
    const head = h("div", "sm-head");
    head.append(
      h("span", "sm-title", `Workflow ${graph.name || "(unnamed)"}`),
      h("span", "sm-sub", `${done} of ${graph.nodes.length} done · ${graph.current ? `current node ${graph.current}` : "no current node"}`),
    );
    root.append(head);

    const layers = layout.layers;
    const rows = Math.max(1, ...layers.map((l) => l.length));
    const longest = Math.max(0, ...graph.edges.map((e) => (e.label ? e.label.length : 0)));
    const gapX = Math.max(GAP_X, Math.min(GAP_X_MAX, longest * CHAR + 16));
    const fits = Math.floor((gapX - 12) / CHAR); // characters of a label the gap holds
    // a back edge goes over the top from a node in the upper half of its layer, else under
    const over = (edge) => edge.points[0][1] <= (layers[edge.points[0][0]].length - 1) / 2;
    const top = layout.edges.some((e) => e.back && over(e)) ? BACK : 0;
    const bottom = layout.edges.some((e) => e.back && !over(e)) ? BACK : 0;
    const width = PAD * 2 + Math.max(1, layers.length) * (W + gapX) - gapX;
    let height = PAD * 2 + top + rows * (H + GAP_Y) - GAP_Y + bottom;
    const at = ([layer, order]) => ({
      x: PAD + layer * (W + gapX),
      y: PAD + top + (order + (rows - layers[layer].length) / 2) * (H + GAP_Y),
    });

    const canvas = h("div", "sm-canvas");
    const stage = h("div", "sm-stage");
    stage.style.width = `${width}px`;
    stage.style.height = `${height}px`;
    const svg = s("svg", { width, height, class: "sm-edges" });
    const defs = s("defs");
    const marker = s("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.append(s("path", { d: "M0,0 L10,5 L0,10 z", class: "sm-arrowhead" }));
    defs.append(marker);
    svg.append(defs);

    const labels = [];
    for (const edge of layout.edges) {
      const data = graph.edges[edge.index];
      const points = edge.points.map(at);
      let d;
      let mid;
      if (edge.back) {
        const a = points[0];
        const b = points[points.length - 1];
        if (over(edge)) {
          const high = PAD;
          d = `M${a.x + W / 2},${a.y} C${a.x + W / 2},${high} ${b.x + W / 2},${high} ${b.x + W / 2},${b.y}`;
          mid = { x: (a.x + b.x + W) / 2, y: high + 14 };
        } else {
          const low = height - PAD;
          d = `M${a.x + W / 2},${a.y + H} C${a.x + W / 2},${low} ${b.x + W / 2},${low} ${b.x + W / 2},${b.y + H}`;
          mid = { x: (a.x + b.x + W) / 2, y: low - 8 };
        }
      } else {
        const pts = points.map((p, i) => ({
          x: i === 0 ? p.x + W : i === points.length - 1 ? p.x : p.x + W / 2,
          y: p.y + H / 2,
        }));
        d = `M${pts[0].x},${pts[0].y}`;
        for (let i = 1; i < pts.length; i++) {
          const dx = (pts[i].x - pts[i - 1].x) / 2;
          d += ` C${pts[i - 1].x + dx},${pts[i - 1].y} ${pts[i].x - dx},${pts[i].y} ${pts[i].x},${pts[i].y}`;
        }
        // the first stretch crosses the gap after the layer the edge leaves: its middle
        mid = { x: points[0].x + W + gapX / 2, y: (pts[0].y + pts[1].y) / 2 - 5 };
      }
      const path = s("path", { d, class: "sm-edge" + (edge.back ? " sm-back" : ""), "marker-end": `url(#${id})` });
      path.dataset.from = data.from;
      path.dataset.to = data.to;
      svg.append(path);
      if (data.label) {
        const lines = wrap(data.label, Math.max(4, edge.back ? fits * 2 : fits));
        // a back edge's label stacks away from its curve's end; another's is centred on its middle
        const first = edge.back ? (over(edge) ? mid.y : mid.y - (lines.length - 1) * LINE) : mid.y - ((lines.length - 1) * LINE) / 2;
        labels.push({ edge, data, lines, x: mid.x, y: first, gap: edge.back ? -1 : edge.points[0][0] });
      }
    }
    // Labels in the same gap, top to bottom: one that would touch the one above moves down.
    const placed = [...labels].sort((a, b) => a.gap - b.gap || a.y - b.y);
    for (let i = 1; i < placed.length; i++) {
      const above = placed[i - 1];
      const label = placed[i];
      if (label.gap >= 0 && label.gap === above.gap) {
        const clear = above.y + above.lines.length * LINE + 2;
        if (label.y < clear) label.y = clear;
      }
    }
    let low = height;
    for (const label of labels) {
      const text = s("text", { x: label.x, y: label.y, class: "sm-edge-label", "text-anchor": "middle" });
      text.dataset.label = label.data.label;
      label.lines.forEach((line, i) => {
        const span = s("tspan", { x: label.x, dy: i === 0 ? 0 : LINE });
        span.textContent = line;
        text.append(span);
      });
      svg.append(text);
      low = Math.max(low, label.y + label.lines.length * LINE);
    }
    if (low > height) {
      height = low + 4;
      svg.setAttribute("height", height);
      stage.style.height = `${height}px`;
    }
    stage.append(svg);

    for (const node of graph.nodes) {
      const p = at(layout.nodes[node.id]);
      const box = h("div", "sm-node");
      box.dataset.nodeId = node.id;
      box.dataset.status = node.status;
      box.style.left = `${p.x}px`;
      box.style.top = `${p.y}px`;
      box.style.width = `${W}px`;
      box.style.height = `${H}px`;
      if (node.id === graph.current) box.classList.add("sm-current");
      const top = h("div", "sm-node-top");
      top.append(h("span", "sm-node-id", node.id));
      if (node.id === graph.current) top.append(h("span", "sm-current-label", "current"));
      box.append(top, h("div", "sm-status", node.status.replace(/_/g, " ")));
      box.title = `${node.id}: ${node.status}` + (node.slot ? ` · slot ${node.slot} (click to switch to it)` : "");
      if (node.slot) {
        const slot = h("div", "sm-node-slot" + (node.slot === currentSlot ? " sm-slot-current" : ""), node.slot);
        slot.prepend(branchIcon());
        box.append(slot);
        box.classList.add("sm-has-slot");
        box.tabIndex = 0;
        box.setAttribute("role", "button");
        const go = () => {
          if (node.slot !== currentSlot) model.send({ type: "switch", node: node.id });
        };
        box.addEventListener("click", go);
        box.addEventListener("keydown", (event) => {
          if (event.key === "Enter") go();
        });
      }
      stage.append(box);
    }
    // The graph is drawn smaller to fit its output's width (not below MIN_SCALE: past that it
    // scrolls); `sizer` takes the room the scaled drawing takes.
    const sizer = h("div", "sm-sizer");
    sizer.append(stage);
    canvas.append(sizer);
    stage.style.transformOrigin = "0 0";
    const fit = () => {
      const room = canvas.clientWidth;
      const scale = room > 0 ? Math.max(MIN_SCALE, Math.min(1, room / width)) : 1;
      stage.style.transform = scale < 1 ? `scale(${scale})` : "";
      sizer.style.width = `${width * scale}px`;
      sizer.style.height = `${height * scale}px`;
    };
    fit();
    const fitter = new ResizeObserver(fit);
    fitter.observe(canvas);
    observers.push(fitter);
    root.append(canvas, scrollbar(canvas, observers));

    const message = h("div", "sm-message");
    const text = error || (status.kind === "error" ? status.text : "");
    if (text) {
      message.classList.add("sm-error");
      message.append(h("span", "sm-text", text));
    }
    root.append(message);
  }

  model.on("change:graph", draw);
  model.on("change:placement", draw);
  model.on("change:current_slot", draw);
  model.on("change:error", draw);
  model.on("change:status", draw);
  draw();
  return () => {
    for (const observer of observers.splice(0)) observer.disconnect();
  };
}

export default { render: live(render) };
