// Shared by every slotmagic widget's view (prepended to its module): the view hides the static
// form displayed right after it (widgets/static.py). JupyterLab and Notebook 7 do it with a
// style rule in common.css; this covers front ends whose outputs are laid out otherwise.
function hideStaticForm(model) {
  const id = model.get("static_id");
  if (!id) return;
  for (const node of document.querySelectorAll(`.slotmagic-static-${CSS.escape(id)}`)) {
    node.hidden = true;
  }
}

// A replayed cell's widget is as of its cell (widgets/snapshot_widget.py): a line says so, with
// a button that makes it follow the session; the line goes once it does.
function asOf(model, el) {
  if (model.get("as_of") === undefined) return;
  const bar = document.createElement("div");
  bar.className = "sm-as-of";
  const text = document.createElement("span");
  const button = document.createElement("button");
  button.className = "sm-button jp-Button jp-mod-minimal";
  button.textContent = "follow live";
  button.addEventListener("click", () => model.send({ type: "follow" }));
  bar.append(text, button);
  const show = () => {
    const said = model.get("as_of") || "";
    bar.hidden = !said;
    button.hidden = !model.get("can_follow");
    text.textContent = `${said} `;
  };
  show();
  model.on("change:as_of", show);
  el.prepend(bar);
}

function live(render) {
  return (props) => {
    const done = render(props);
    asOf(props.model, props.el);
    hideStaticForm(props.model);
    setTimeout(() => hideStaticForm(props.model), 200); // the static form is displayed just after
    return done;
  };
}
