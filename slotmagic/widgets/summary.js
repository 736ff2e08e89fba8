// The summary editor's view (%slot compact --edit): the previewed summary in a text box and a
// button that sends the edited text to the kernel, which applies it (widgets/summary.py) and
// answers in `status`. Text goes in with textContent and value only, never as HTML.

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "sm-widget sm-summary";
  const head = document.createElement("div");
  head.className = "sm-summary-head";
  head.textContent = model.get("heading");
  const area = document.createElement("textarea");
  area.className = "sm-summary-text";
  area.rows = 8;
  area.value = model.get("text");
  area.setAttribute("aria-label", "summary to apply");
  const row = document.createElement("div");
  row.className = "sm-summary-row";
  const button = document.createElement("button");
  button.className = "jp-Button jp-mod-styled jp-mod-accept";
  button.textContent = "Apply summary";
  const status = document.createElement("span");
  status.className = "sm-summary-status";
  status.setAttribute("role", "status");
  button.addEventListener("click", () => model.send({ type: "apply", text: area.value }));
  const sync = () => {
    status.textContent = model.get("status");
    status.classList.toggle("sm-error", model.get("failed"));
    area.disabled = button.disabled = model.get("applied");
  };
  model.on("change:status", sync);
  model.on("change:applied", sync);
  sync();
  row.append(button, status);
  root.append(head, area, row);
  el.append(root);
}

export default { render: live(render) };
