// The slot tree widget's view. State is the model's (nodes, current, collapsed, status, error);
// actions go to the kernel with model.send. Every text is inserted with textContent.

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// Buttons carry JupyterLab's own classes (dialog buttons; minimal toolbar buttons), so they look
// as JupyterLab's do; common.css styles them where JupyterLab's style sheets are absent.
const LAB_BUTTON = {
  "sm-primary": "jp-mod-styled jp-mod-accept",
  "sm-danger": "jp-mod-styled jp-mod-warn",
  "sm-cancel": "jp-mod-styled jp-mod-reject",
  "sm-minimal": "jp-Button jp-mod-minimal",
};

function button(label, className, onClick) {
  const lab = LAB_BUTTON[className] || "";
  const b = h("button", `sm-button ${className || ""} ${lab}`.trim(), label);
  b.type = "button";
  b.addEventListener("click", (event) => {
    event.stopPropagation();
    onClick();
  });
  return b;
}

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

function render({ model, el }) {
  const root = h("div", "sm-widget sm-tree");
  const head = h("div", "sm-head");
  const rows = h("div", "sm-tree-rows");
  rows.setAttribute("role", "tree");
  const message = h("div", "sm-message");
  // The menu is JupyterLab's (Lumino's classes), laid on the page rather than in the output, which
  // clips what overflows it; it opens where it fits inside the window.
  const menu = h("div", "lm-Menu sm-menu");
  menu.setAttribute("role", "menu");
  menu.tabIndex = -1;
  menu.hidden = true;
  const menuItems = h("ul", "lm-Menu-content");
  menu.append(menuItems);
  document.body.append(menu);
  root.append(head, rows, message);
  el.append(root);

  // A state that arrives between a press in the rows and its release is drawn after the click:
  // drawn at once, it would take the pressed row out of the page and the click would be lost.
  let pressed = false;
  let owed = false;
  rows.addEventListener("pointerdown", () => {
    pressed = true;
  });
  const release = () => {
    if (!pressed) return;
    // After the click this release ends, which comes later in the same task.
    setTimeout(() => {
      pressed = false;
      if (owed) {
        owed = false;
        drawRows();
      }
    }, 0);
  };
  document.addEventListener("pointerup", release, true);
  document.addEventListener("pointercancel", release, true);

  let form = null; // {kind: "derive" | "rename" | "delete" | "force", slot, text?}
  let shownStatus = 0;

  const send = (content) => model.send(content);

  function setCollapsed(ids) {
    model.set("collapsed", ids);
    model.save_changes();
  }

  // The kernel sends the whole tree in `nodes` when its shape changes and, after a turn, only
  // the slots that changed in `changed` (id -> node): what shows is `nodes` with those in place.
  function currentNodes() {
    const changed = model.get("changed") || {};
    const nodes = model.get("nodes");
    if (!Object.keys(changed).length) return nodes;
    return nodes.map((n) => changed[n.id] || n);
  }

  function drawHead() {
    const nodes = currentNodes();
    head.replaceChildren(
      h("span", "sm-title", "Slots"),
      h("span", "sm-sub", `session ${model.get("session_id")} · ${nodes.length} slot${nodes.length === 1 ? "" : "s"} · current ${model.get("current")}`),
    );
    if (nodes.some((n) => n.children.length)) {
      const tools = h("span", "sm-tools");
      tools.append(
        button("Expand all", "sm-minimal", () => setCollapsed([])),
        button("Collapse all", "sm-minimal", () =>
          setCollapsed(nodes.filter((n) => n.children.length && n.depth >= 0).map((n) => n.id)),
        ),
      );
      head.append(tools);
    }
  }

  // A big tree draws only the rows in sight (plus a margin), between two spacers that keep
  // the scroll bar true: rows are ROW pixels high (tree.css).
  const ROW = 26;
  const WINDOW_OVER = 200;
  let shown = []; // [node, collapsed, hidden below] of every row not folded away
  let painted = null; // [first, last] rows drawn, when windowed

  function drawRows() {
    if (pressed) {
      owed = true;
      return;
    }
    const nodes = currentNodes();
    const collapsed = new Set(model.get("collapsed"));
    const parentOf = new Map(nodes.map((n) => [n.id, n.parent]));
    const hiddenBelow = new Map(); // a collapsed slot -> how many slots its subtree hides
    const folded = new Set();
    for (const node of nodes) {
      if (node.parent !== null && (folded.has(node.parent) || collapsed.has(node.parent))) {
        folded.add(node.id);
        let top = node.parent;
        while (folded.has(top)) top = parentOf.get(top);
        hiddenBelow.set(top, (hiddenBelow.get(top) || 0) + 1);
      }
    }
    shown = nodes.filter((n) => !folded.has(n.id)).map((n) => [n, collapsed.has(n.id), hiddenBelow.get(n.id) || 0]);
    painted = null;
    paintRows();
  }

  function paintRows() {
    const keep = rows.scrollTop;
    if (shown.length <= WINDOW_OVER) {
      rows.replaceChildren(...shown.map((args) => drawRow(...args)));
      rows.scrollTop = keep;
      return;
    }
    const first = Math.max(0, Math.floor(keep / ROW) - 20);
    const last = Math.min(shown.length, first + Math.ceil((rows.clientHeight || 420) / ROW) + 40);
    if (painted && painted[0] === first && painted[1] === last) return;
    painted = [first, last];
    const spacer = (count) => {
      const gap = h("div", "sm-tree-gap");
      gap.style.height = `${count * ROW}px`;
      return gap;
    };
    rows.replaceChildren(
      spacer(first),
      ...shown.slice(first, last).map((args) => drawRow(...args)),
      spacer(shown.length - last),
    );
    rows.scrollTop = keep;
  }

  let scrolling = false;
  rows.addEventListener("scroll", () => {
    if (scrolling || shown.length <= WINDOW_OVER) return;
    scrolling = true;
    requestAnimationFrame(() => {
      scrolling = false;
      paintRows();
    });
  });

  function drawRow(node, isCollapsed, hidden) {
    const row = h("div", "sm-tree-row" + (node.current ? " sm-current" : ""));
    row.setAttribute("role", "treeitem");
    row.setAttribute("aria-level", String(node.depth + 1));
    row.setAttribute("aria-selected", node.current ? "true" : "false");
    row.dataset.slotId = node.id;
    row.tabIndex = 0;
    if (node.children.length) row.setAttribute("aria-expanded", isCollapsed ? "false" : "true");
    for (const on of node.guides) row.append(h("span", "sm-guide" + (on ? " sm-on" : "")));
    if (node.depth > 0) row.append(h("span", "sm-elbow" + (node.last ? " sm-last" : "")));

    const cells = h("span", "sm-cells");
    if (node.children.length) {
      const toggle = h("button", "sm-toggle", isCollapsed ? "▸" : "▾");
      toggle.type = "button";
      toggle.setAttribute("aria-label", isCollapsed ? `Expand ${node.id}` : `Collapse ${node.id}`);
      toggle.addEventListener("click", (event) => {
        event.stopPropagation();
        const now = new Set(model.get("collapsed"));
        if (now.has(node.id)) now.delete(node.id);
        else now.add(node.id);
        setCollapsed([...now]);
      });
      cells.append(toggle);
    } else {
      cells.append(h("span", "sm-toggle"));
    }
    cells.append(h("span", "sm-dot"), h("span", "sm-id", node.id));
    if (node.current) cells.append(h("span", "sm-current-label", "current"));
    if (node.mode !== "full") cells.append(h("span", "sm-badge sm-mode", node.mode));
    if (node.source === "static") cells.append(h("span", "sm-badge sm-static", "static"));
    if (node.parent !== null) {
      // Said in words: the icon alone (with a bare number) meant nothing until hovered.
      const fork = h("span", "sm-fork", `forked at ${node.fork_at}`);
      fork.prepend(branchIcon());
      fork.title = `forked from ${node.parent} after ${node.fork_at} message${node.fork_at === 1 ? "" : "s"}`;
      fork.setAttribute("aria-label", fork.title);
      cells.append(fork);
    }
    cells.append(h("span", "sm-counts", `${node.messages} msg · ${node.tokens.toLocaleString("en-US")} tok`));
    if (hidden) cells.append(h("span", "sm-hidden-count", `+${hidden} below`));
    if (node.last_user) {
      const last = h("span", "sm-last", node.last_user);
      last.title = node.last_user;
      cells.append(last);
    }
    const more = h("button", "sm-more", "⋯");
    more.type = "button";
    more.setAttribute("aria-label", `Actions for ${node.id}`);
    more.addEventListener("click", (event) => {
      event.stopPropagation();
      const box = more.getBoundingClientRect();
      openMenu(node, box.left, box.bottom);
    });
    cells.append(more);
    row.append(cells);

    row.addEventListener("click", () => {
      closeMenu();
      if (!node.current) send({ type: "switch", slot: node.id });
    });
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !node.current) send({ type: "switch", slot: node.id });
    });
    row.addEventListener("contextmenu", (event) => {
      event.preventDefault();
      event.stopPropagation();
      openMenu(node, event.clientX, event.clientY);
    });
    return row;
  }

  function openMenu(node, x, y) {
    const items = [
      ["Switch to", () => send({ type: "switch", slot: node.id })],
      ["Derive…", () => openForm({ kind: "derive", slot: node.id })],
    ];
    if (node.id !== "default") {
      items.push(["Rename…", () => openForm({ kind: "rename", slot: node.id })]);
      items.push(["Delete…", () => openForm({ kind: "delete", slot: node.id })]);
    }
    menuItems.replaceChildren();
    for (const [label, act] of items) {
      const item = h("li", "lm-Menu-item sm-menu-item");
      item.setAttribute("role", "menuitem");
      item.tabIndex = -1;
      item.dataset.label = label;
      item.append(h("div", "lm-Menu-itemIcon"), h("div", "lm-Menu-itemLabel", label), h("div", "lm-Menu-itemShortcut"));
      const choose = (event) => {
        event.stopPropagation();
        closeMenu();
        act();
      };
      item.addEventListener("click", choose);
      item.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") choose(event);
      });
      item.addEventListener("mouseenter", () => item.focus());
      item.addEventListener("focus", () => {
        for (const other of menuItems.children) other.classList.toggle("lm-mod-active", other === item);
      });
      menuItems.append(item);
    }
    menu.hidden = false;
    // Inside the window: left or above the pointer when there is no room right of or below it.
    const size = menu.getBoundingClientRect();
    const room = { w: document.documentElement.clientWidth, h: document.documentElement.clientHeight };
    const left = x + size.width <= room.w ? x : Math.max(0, Math.min(x, room.w) - size.width);
    const top = y + size.height <= room.h ? y : Math.max(0, Math.min(y, room.h) - size.height);
    menu.style.left = `${left}px`;
    menu.style.top = `${top}px`;
    menuItems.firstChild.focus();
  }

  function moveFocus(step) {
    const items = [...menuItems.children];
    const at = items.indexOf(document.activeElement);
    items[(at + step + items.length) % items.length].focus();
  }

  function closeMenu() {
    menu.hidden = true;
  }

  function openForm(next) {
    form = next;
    drawMessage();
  }

  function drawMessage() {
    message.className = "sm-message";
    message.replaceChildren();
    if (form) {
      if (form.kind === "derive" || form.kind === "rename") {
        const label = form.kind === "derive" ? `Derive a slot from ${form.slot}:` : `Rename ${form.slot} to:`;
        const input = h("input", "sm-input");
        input.placeholder = "slot id";
        input.setAttribute("aria-label", "new slot id");
        const submit = () => {
          const value = input.value.trim();
          if (!value) return;
          send({ type: form.kind, slot: form.slot, new: value });
          form = null;
          drawMessage();
        };
        input.addEventListener("keydown", (event) => {
          if (event.key === "Enter") submit();
          if (event.key === "Escape") openForm(null);
        });
        message.append(
          h("span", "sm-text", label),
          input,
          button(form.kind === "derive" ? "Derive" : "Rename", "sm-primary", submit),
          button("Cancel", "sm-cancel", () => openForm(null)),
        );
        setTimeout(() => input.focus(), 0);
      } else {
        const force = form.kind === "force";
        const text = force
          ? `${form.text} Delete it and those turns anyway?`
          : `Delete slot ${form.slot}? Slots derived from it keep their whole history.`;
        message.append(
          h("span", "sm-text", text),
          button(force ? "Delete anyway" : "Delete", "sm-danger", () => {
            send({ type: "delete", slot: form.slot, force });
            form = null;
            drawMessage();
          }),
          button("Cancel", "sm-cancel", () => openForm(null)),
        );
      }
      return;
    }
    const error = model.get("error");
    const status = model.get("status") || {};
    // "switched to slot x" no longer holds once the sidebar or a cell made another slot current
    const stale = status.current !== undefined && status.current !== model.get("current");
    const text = error || (status.seq === shownStatus && !stale ? status.text : "");
    if (!text) return;
    if (error || status.kind === "error") message.classList.add("sm-error");
    message.append(h("span", "sm-text", text));
    if (!error) message.append(button("×", "sm-minimal", () => {
      shownStatus = -1;
      drawMessage();
    }));
  }

  function onStatus() {
    const status = model.get("status") || {};
    shownStatus = status.seq;
    if (status.kind === "error" && status.error === "SlotNotEmpty" && status.action === "delete") {
      openForm({ kind: "force", slot: status.slot, text: status.text });
      return;
    }
    drawMessage();
  }

  const all = () => {
    drawHead();
    drawRows();
    drawMessage();
  };
  const onDocument = (event) => {
    if (!menu.contains(event.target)) closeMenu();
  };
  const onKey = (event) => {
    if (menu.hidden) return;
    if (event.key === "Escape") closeMenu();
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      moveFocus(event.key === "ArrowDown" ? 1 : -1);
    }
  };
  window.addEventListener("blur", closeMenu);
  window.addEventListener("resize", closeMenu);
  document.addEventListener("click", onDocument, true);
  document.addEventListener("keydown", onKey);
  model.on("change:nodes", all);
  model.on("change:changed", all);
  model.on("change:current", all);
  model.on("change:session_id", drawHead);
  model.on("change:collapsed", drawRows);
  model.on("change:error", drawMessage);
  model.on("change:status", onStatus);
  all();
  return () => {
    document.removeEventListener("click", onDocument, true);
    document.removeEventListener("pointerup", release, true);
    document.removeEventListener("pointercancel", release, true);
    document.removeEventListener("keydown", onKey);
    window.removeEventListener("blur", closeMenu);
    window.removeEventListener("resize", closeMenu);
    menu.remove();
  };
}

export default { render: live(render) };
