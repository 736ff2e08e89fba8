// The preview widget's view: what the model will be sent next, in order. Each entry is a row
// (role, label, tokens, first line) that opens to its body; what was left out is a greyed row
// where it was. Rows, labels and the summary line come from the model (engine/view.py: view_data).

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const num = (n) => Number(n).toLocaleString("en-US");

function firstLine(text) {
  const line = (text || "").split("\n").find((l) => l.trim()) || "";
  return line.length > 140 ? line.slice(0, 139) + "…" : line;
}

function render({ model, el }) {
  const root = h("div", "sm-widget sm-preview");
  el.append(root);
  const open = new Set(); // entry numbers the user opened

  function entry(row) {
    const item = h("div", "sm-entry" + (row.injected ? " sm-injected" : "") + (row.pinned ? " sm-pinned" : ""));
    item.dataset.kind = row.kind;
    item.dataset.role = row.role;
    const head = h("button", "sm-entry-head");
    head.type = "button";
    const isOpen = open.has(row.number);
    head.setAttribute("aria-expanded", isOpen ? "true" : "false");
    head.append(
      h("span", "sm-caret", isOpen ? "▾" : "▸"),
      h("span", "sm-number", `[${row.number}]`),
      h("span", "sm-role", row.role),
    );
    if (row.label) head.append(h("span", "sm-badge sm-kind", row.label));
    for (const ref of row.refs) head.append(h("span", "sm-badge sm-ref", "namespace ref"));
    head.append(h("span", "sm-tokens", `${num(row.tokens)} tok`));
    head.append(h("span", "sm-first", firstLine(row.text) || (row.calls.length ? row.calls[0] : "(no text)")));
    item.append(head);
    if (isOpen) {
      const body = h("pre", "sm-body", row.text || "(no text)");
      item.append(body);
      for (const call of row.calls) item.append(h("div", "sm-call", `→ tool call ${call}`));
      for (const ref of row.refs) item.append(h("div", "sm-call", `namespace reference: ${ref}`));
      if (row.cut) item.append(h("div", "sm-sub", `… ${num(row.cut)} more characters (%slot show has them all)`));
    }
    head.addEventListener("click", () => {
      if (open.has(row.number)) open.delete(row.number);
      else open.add(row.number);
      draw();
    });
    return item;
  }

  function draw() {
    const view = model.get("view");
    const error = model.get("error");
    root.replaceChildren();
    if (!view || !view.rows) return;
    const head = h("div", "sm-head");
    head.append(h("span", "sm-title", `Next request of ${view.slot}`), h("span", "sm-sub", view.summary));
    root.append(head);
    if (view.budget) {
      const meter = h("div", "sm-meter" + (view.budget.needs_compaction ? " sm-past" : ""));
      const fill = h("div", "sm-meter-fill");
      const share = view.budget.history_available ? view.budget.history_used / view.budget.history_available : 1;
      fill.style.width = `${Math.min(100, 100 * share)}%`;
      meter.append(fill);
      meter.title = `history and tool results ${num(view.budget.history_used)} of ${num(view.budget.history_available)} tokens before compaction`;
      root.append(meter);
    }
    const list = h("div", "sm-entries");
    for (const row of view.rows) {
      if (row.type === "entry") list.append(entry(row));
      else {
        const gap = h("div", "sm-gap", `… ${row.text}`);
        gap.dataset.reason = row.reason || row.type;
        list.append(gap);
      }
    }
    if (!view.rows.length) list.append(h("div", "sm-gap", "nothing yet: the next request is the new user message alone"));
    root.append(list, h("div", "sm-sub sm-then", "then the new user message"));
    const message = h("div", "sm-message sm-error");
    if (error) message.append(h("span", "sm-text", error));
    root.append(message);
  }

  model.on("change:view", draw);
  model.on("change:error", draw);
  draw();
}

export default { render: live(render) };
