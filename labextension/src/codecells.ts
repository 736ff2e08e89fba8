/**
 * A "copy into a new cell" button on each code block of a slotmagic reply: a click puts the
 * block's code into a new code cell below the cell whose output holds it. The block is boxed
 * (as a reply's code is in `%slot compare`'s columns) and the button sits on the box.
 *
 * A reply is found by the footer every slotmagic reply output has (`.slotmagic-footer`); its
 * code blocks are the `pre > code` elements the kernel rendered. Outputs come and go as cells
 * run, so the notebook's DOM is watched and buttons are added as replies appear.
 */
import { type INotebookTracker, type NotebookPanel, NotebookActions } from '@jupyterlab/notebook';

const BUTTON_CLASS = 'slotmagic-code-to-cell';
const BOX_CLASS = 'slotmagic-codeblock';
const REPLY_SELECTOR = '.jp-OutputArea-output';

/** The code of a `pre` block as it reads (its text, without a trailing newline). */
export function blockCode(pre: Element): string {
  return (pre.textContent ?? '').replace(/\n$/, '');
}

function decorate(panel: NotebookPanel, root: Element): void {
  const outputs = root.matches(REPLY_SELECTOR) ? [root] : Array.from(root.querySelectorAll(REPLY_SELECTOR));
  for (const output of outputs) {
    if (!output.querySelector('.slotmagic-footer')) {
      continue;
    }
    for (const pre of Array.from(output.querySelectorAll('pre'))) {
      if (!pre.querySelector('code') || pre.parentElement?.classList.contains(BOX_CLASS)) {
        continue;
      }
      const button = document.createElement('button');
      button.className = BUTTON_CLASS;
      button.type = 'button';
      button.textContent = 'Copy into a new cell';
      button.title = 'Put this code into a new cell below';
      button.addEventListener('click', event => {
        event.preventDefault();
        event.stopPropagation();
        copyIntoNewCell(panel, pre);
      });
      const box = document.createElement('div');
      box.className = BOX_CLASS;
      pre.parentElement?.insertBefore(box, pre);
      box.append(pre, button);
    }
  }
}

/** Insert a code cell holding `pre`'s code below the cell whose output holds it. */
export function copyIntoNewCell(panel: NotebookPanel, pre: Element): void {
  const notebook = panel.content;
  const index = notebook.widgets.findIndex(cell => cell.node.contains(pre));
  if (index < 0 || !notebook.model) {
    return;
  }
  notebook.activeCellIndex = index;
  NotebookActions.insertBelow(notebook);
  NotebookActions.changeCellType(notebook, 'code');
  const cell = notebook.activeCell;
  if (cell) {
    cell.model.sharedModel.setSource(blockCode(pre));
  }
}

function watch(panel: NotebookPanel): void {
  const node = panel.content.node;
  decorate(panel, node);
  const observer = new MutationObserver(records => {
    for (const record of records) {
      for (const added of Array.from(record.addedNodes)) {
        if (added instanceof Element) {
          const output = added.closest(REPLY_SELECTOR);
          decorate(panel, output ?? added);
        }
      }
    }
  });
  observer.observe(node, { childList: true, subtree: true });
  panel.disposed.connect(() => observer.disconnect());
}

/** Add the buttons to every notebook the tracker opens. */
export function addCodeButtons(tracker: INotebookTracker): void {
  tracker.forEach(watch);
  tracker.widgetAdded.connect((_, panel) => watch(panel));
}
