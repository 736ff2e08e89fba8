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

function live(render) {
  return (props) => {
    const done = render(props);
    hideStaticForm(props.model);
    setTimeout(() => hideStaticForm(props.model), 200); // the static form is displayed just after
    return done;
  };
}
