// The budget widget's view: one bar for the slot's budget (its own when it has one, else the
// model's window), a region per category (its allowance) filled by what the next request uses,
// the compaction threshold marked; hover a region for its numbers. The scale's labels never
// overlap: the threshold's moves to a line of its own where it would touch another. All numbers and texts come from the model (engine/budgeting.py: budget_data).

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const pct = (part, whole) => `${Math.max(0, Math.min(100, (100 * part) / (whole || 1)))}%`;
const num = (n) => Number(n).toLocaleString("en-US");

function render({ model, el }) {
  const root = h("div", "sm-widget sm-budget");
  el.append(root);
  const tip = h("div", "sm-tip");
  tip.hidden = true;

  function showTip(text, event) {
    tip.textContent = text;
    tip.hidden = false;
    const box = root.getBoundingClientRect();
    const x = Math.min(event.clientX - box.left + 12, box.width - tip.offsetWidth - 4);
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${event.clientY - box.top + 16}px`;
  }

  function draw() {
    const b = model.get("budget");
    const error = model.get("error");
    root.replaceChildren();
    if (!b || !b.categories) return;
    const about = b.exact ? "" : "~";
    const head = h("div", "sm-head");
    head.append(
      h("span", "sm-title", `Budget of ${b.slot}`),
      h(
        "span",
        "sm-sub",
        `${b.model} · ${about}${num(b.used)} of ${num(b.total)} tokens` +
          (b.own_budget ? ` (the slot's own budget; window ${num(b.window)})` : "") +
          (b.window_known ? "" : " (window assumed)") +
          (b.exact ? "" : " · estimated"),
      ),
    );
    root.append(head);

    const track = h("div", "sm-track");
    track.setAttribute("role", "img");
    track.setAttribute(
      "aria-label",
      b.categories.map((c) => `${c.label} ${num(c.used)} of ${num(c.allowed)}`).join(", "),
    );
    for (const c of b.categories) {
      if (!c.allowed) continue;
      const region = h("div", "sm-region" + (c.over ? " sm-over" : ""));
      region.dataset.category = c.name;
      region.style.left = pct(c.start, b.scale);
      region.style.width = pct(c.allowed, b.scale);
      const fill = h("div", "sm-fill");
      fill.style.width = pct(c.used, c.allowed);
      if (c.used > 0) fill.style.minWidth = "2px";
      region.append(fill);
      region.addEventListener("mousemove", (event) => showTip(c.tip, event));
      region.addEventListener("mouseleave", () => (tip.hidden = true));
      track.append(region);
    }
    const marker = h("div", "sm-threshold" + (b.needs_compaction ? " sm-past" : ""));
    marker.style.left = pct(b.threshold_at, b.scale);
    const markerTip = `compaction threshold: history and tool results past ${num(b.threshold)} tokens are compacted (${about}${num(b.history_used)} now)`;
    marker.addEventListener("mousemove", (event) => showTip(markerTip, event));
    marker.addEventListener("mouseleave", () => (tip.hidden = true));
    track.append(marker);
    const scale = h("div", "sm-scale");
    const label = h("span", "sm-threshold-label", `compaction at ${num(b.threshold)}`);
    label.style.left = pct(b.threshold_at, b.scale);
    const zero = h("span", "sm-zero", "0");
    const end = h("span", "sm-end", num(b.total));
    scale.append(zero, label, end);
    root.append(track, scale);
    placeLabel = () => {
      scale.classList.remove("sm-two-lines");
      label.style.left = pct(b.threshold_at, b.scale);
      const a = label.getBoundingClientRect();
      if (!a.width) return; // not laid out yet: the observer calls again
      const touches = (other) => {
        const o = other.getBoundingClientRect();
        return a.left < o.right + 4 && o.left < a.right + 4;
      };
      if (!touches(zero) && !touches(end)) return;
      scale.classList.add("sm-two-lines"); // centred under the marker, inside the bar's width
      const width = scale.getBoundingClientRect().width;
      const x = (Math.min(b.threshold_at, b.scale) / (b.scale || 1)) * width;
      label.style.left = `${Math.max(0, Math.min(width - a.width, x - a.width / 2))}px`;
    };
    placeLabel();

    const legend = h("div", "sm-legend");
    for (const c of b.categories) {
      const item = h("span", "sm-legend-item" + (c.over ? " sm-over" : ""));
      item.dataset.category = c.name;
      item.append(
        h("span", "sm-swatch"),
        h("span", "sm-legend-name", c.label),
        h("span", "sm-legend-value", `${about}${num(c.used)} / ${num(c.allowed)}`),
      );
      item.title = c.tip;
      legend.append(item);
    }
    root.append(legend);
    const notes = [];
    if (b.needs_compaction) notes.push("history and tool results are past the threshold: the next turn compacts them");
    notes.push(b.compactions ? `${b.compactions} compaction${b.compactions === 1 ? "" : "s"}, ${b.folded} messages folded` : "no compactions yet");
    root.append(h("div", "sm-sub sm-notes", notes.join(" · ")));
    const message = h("div", "sm-message sm-error");
    if (error) message.append(h("span", "sm-text", error));
    root.append(message, tip);
  }

  let placeLabel = () => {};
  const observer = new ResizeObserver(() => placeLabel());
  observer.observe(root);
  model.on("change:budget", draw);
  model.on("change:error", draw);
  draw();
  return () => observer.disconnect();
}

export default { render: live(render) };
