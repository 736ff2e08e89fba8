// The fan-out widget's view: one column per reply, side by side, each with its slot, model,
// status, reply (as Markdown the kernel rendered safely; else as text), tokens, latency and cost;
// the summary line under them.
// Everything shown comes from the model's `columns` and `summary`.

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function facts(column) {
  const parts = [];
  if (column.tokens) parts.push(column.tokens);
  if (column.latency !== null && column.latency !== undefined) parts.push(`${Number(column.latency).toFixed(2)} s`);
  if (column.cost) parts.push(column.cost);
  return parts.join(" · ");
}

function render({ model, el }) {
  const root = h("div", "sm-widget sm-fanout");
  el.append(root);

  function column(data) {
    const box = h("div", "sm-column");
    box.dataset.status = data.status;
    box.dataset.key = data.key;
    const head = h("div", "sm-column-head");
    head.append(h("span", "sm-title", data.key));
    if (data.key !== data.slot) head.append(h("span", "sm-sub", `from ${data.slot}`));
    head.append(h("span", "sm-badge sm-status", data.status));
    box.append(head);
    box.append(h("div", "sm-sub sm-model", data.model));
    const body = h("div", "sm-column-text");
    if (data.error) {
      body.append(h("div", "sm-column-error", `failed: ${data.error}`));
    } else {
      if (data.html) {
        // The reply as Markdown, rendered in the kernel with raw HTML escaped and unsafe links
        // refused (slotmagic/markdown.py): the one place model text becomes markup.
        body.classList.add("sm-markdown");
        body.innerHTML = data.html;
      } else {
        body.textContent = data.text || (data.status === "waiting" || data.status === "streaming" ? "…" : "");
      }
      if (data.status === "interrupted") body.append(h("div", "sm-column-error", "interrupted: nothing stored"));
    }
    box.append(body);
    const foot = h("div", "sm-column-foot sm-sub");
    if (data.stored) foot.append(h("div", "sm-stored", data.stored));
    const line = facts(data);
    if (line) foot.append(h("div", "sm-facts", line));
    box.append(foot);
    return box;
  }

  function draw() {
    const columns = model.get("columns") || [];
    const row = h("div", "sm-columns");
    for (const data of columns) row.append(column(data));
    const summary = h("div", "sm-summary sm-sub", model.get("summary") || "");
    root.replaceChildren(row, summary);
  }

  draw();
  model.on("change:columns", draw);
  model.on("change:summary", draw);
}

export default { render: live(render) };
