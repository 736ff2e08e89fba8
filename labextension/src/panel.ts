/**
 * The "Slots" sidebar view: renders the model, reports clicks. Every text from users, models
 * or the kernel goes in as textContent, never as HTML.
 */
import { Widget } from '@lumino/widgets';

import type { IStateDiff } from './diff';
import { budgetView, countsLabel, workflowLabel, slotTooltip } from './format';
import type { SlotsModel } from './model';
import type { IStateMessage } from './protocol';
import { slotRows } from './rows';
import { hintFor } from './status';

export interface IPanelOptions {
  showMessageCounts: boolean;
  showTokenCounts: boolean;
  showLastMessage: boolean;
}

export const DEFAULT_OPTIONS: IPanelOptions = {
  showMessageCounts: true,
  showTokenCounts: true,
  showLastMessage: true
};

const ROW = 'jp-SlotsPanel-row';
const FLASH_MS = 1500;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class SlotsPanel extends Widget {
  constructor(
    readonly model: SlotsModel,
    private readonly _onActivate: (slot: string) => void
  ) {
    super();
    this.addClass('jp-SlotsPanel');
    this.node.tabIndex = -1;
    this._header = el('div', 'jp-SlotsPanel-header');
    this._body = el('div', 'jp-SlotsPanel-body');
    this._notices = el('div', 'jp-SlotsPanel-notices');
    this._list = el('ul', 'jp-SlotsPanel-tree');
    this._list.setAttribute('role', 'tree');
    this._list.setAttribute('aria-label', 'Slots');
    this._body.append(this._notices, this._list);
    this.node.append(this._header, this._body);
    this.node.addEventListener('click', this);
    this.node.addEventListener('keydown', this);
    this.node.addEventListener('contextmenu', this);
    model.changed.connect(this._onChanged, this);
    this._render(null);
  }

  /** The slot whose row was right-clicked last (what the context menu's commands act on). */
  get contextSlot(): string | null {
    return this._contextSlot;
  }

  get options(): IPanelOptions {
    return this._options;
  }

  set options(options: IPanelOptions) {
    this._options = { ...options };
    this._render(null);
  }

  handleEvent(event: Event): void {
    const target = event.target as HTMLElement | null;
    const row = target?.closest<HTMLElement>(`.${ROW}`);
    switch (event.type) {
      case 'click':
        if (target?.closest('.jp-SlotsPanel-dismiss')) {
          this.model.dismissError();
        } else if (row?.dataset.slotId) {
          this._onActivate(row.dataset.slotId);
        }
        break;
      case 'keydown': {
        const key = (event as KeyboardEvent).key;
        if (row?.dataset.slotId && (key === 'Enter' || key === ' ')) {
          event.preventDefault();
          this._onActivate(row.dataset.slotId);
        } else if (row && (key === 'ArrowDown' || key === 'ArrowUp')) {
          event.preventDefault();
          const sibling = key === 'ArrowDown' ? row.nextElementSibling : row.previousElementSibling;
          (sibling as HTMLElement | null)?.focus();
        }
        break;
      }
      case 'contextmenu':
        // The application's context menu opens next (document level) and its slot commands
        // act on this slot; elsewhere in the panel they are disabled.
        this._contextSlot = row?.dataset.slotId ?? null;
        break;
    }
  }

  protected onActivateRequest(): void {
    const row = this._body.querySelector<HTMLElement>(`.${ROW}.jp-mod-current`) ?? this._body.querySelector(`.${ROW}`);
    (row ?? this.node).focus();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.changed.disconnect(this._onChanged, this);
    super.dispose();
  }

  private _onChanged(_model: SlotsModel, diff: IStateDiff | null): void {
    if (diff?.same) {
      return;
    }
    this._render(diff);
  }

  private _render(diff: IStateDiff | null): void {
    const { model } = this;
    const state = model.state;
    this._renderHeader(state);
    this._notices.replaceChildren();

    const error = model.error;
    if (error) {
      const bar = el('div', 'jp-SlotsPanel-error');
      bar.setAttribute('role', 'alert');
      bar.append(el('span', 'jp-SlotsPanel-errorText', error.message));
      const dismiss = el('button', 'jp-SlotsPanel-dismiss jp-Button jp-mod-minimal', '×');
      dismiss.title = 'Dismiss';
      dismiss.setAttribute('aria-label', 'Dismiss the error');
      bar.append(dismiss);
      this._notices.append(bar);
    }

    const hint = hintFor(model.status);
    if (hint) {
      const box = el('div', 'jp-SlotsPanel-hint');
      box.dataset.status = model.status.kind;
      box.append(el('div', 'jp-SlotsPanel-hintTitle', hint.title), el('div', 'jp-SlotsPanel-hintDetail', hint.detail));
      if (hint.code) {
        box.append(el('code', 'jp-SlotsPanel-hintCode', hint.code));
      }
      this._notices.append(box);
      this._renderTree(null, null);
      return;
    }
    if (state) {
      this._renderExtras(state);
    }
    this._renderTree(state, diff);
  }

  private _renderHeader(state: IStateMessage | null): void {
    this._header.replaceChildren(el('h2', 'jp-SlotsPanel-title', 'Slots'));
    if (state) {
      const line = el('div', 'jp-SlotsPanel-session');
      line.append(el('span', 'jp-SlotsPanel-sessionId', state.session));
      if (state.model) {
        line.append(el('span', 'jp-SlotsPanel-model', state.model));
      }
      line.title = `session ${state.session}\nmodel ${state.model}`;
      this._header.append(line);
    }
  }

  private _renderExtras(state: IStateMessage): void {
    const budget = budgetView(state.budget);
    if (budget) {
      const box = el('div', 'jp-SlotsPanel-budget');
      box.append(el('div', 'jp-SlotsPanel-label', `Budget of ${state.current}: ${budget.label}`));
      if (budget.fraction !== null) {
        box.append(this._bar(budget.fraction));
      }
      for (const part of budget.parts) {
        const line = el('div', 'jp-SlotsPanel-budgetPart');
        line.append(
          el('span', 'jp-SlotsPanel-budgetName', part.name),
          this._bar(part.fraction),
          el('span', 'jp-SlotsPanel-budgetValue', part.label)
        );
        box.append(line);
        if (part.over && part.note) {
          // past its share: said in words under the row, all of it on hover
          line.classList.add('jp-mod-over');
          line.title = part.note;
          const said = el('div', 'jp-SlotsPanel-budgetOver', `${part.name} ${part.over}`);
          said.title = part.note;
          box.append(said);
        }
      }
      this._notices.append(box);
    }
    const workflow = workflowLabel(state.workflow);
    if (workflow) {
      this._notices.append(el('div', 'jp-SlotsPanel-workflow', `Workflow: ${workflow}`));
    }
  }

  private _bar(fraction: number): HTMLElement {
    const bar = el('div', 'jp-SlotsPanel-bar');
    const fill = el('div', 'jp-SlotsPanel-barFill');
    fill.style.width = `${Math.round(fraction * 100)}%`;
    if (fraction >= 0.9) {
      fill.classList.add('jp-mod-full');
    }
    bar.append(fill);
    return bar;
  }

  /**
   * The rows, each slot's element kept from one state to the next and left in place unless the
   * order changed: a state that arrives between a press and its release (the kernel reporting
   * another change) would otherwise take the pressed row out of the page and lose the click,
   * and a focused row would lose its focus.
   */
  private _renderTree(state: IStateMessage | null, diff: IStateDiff | null): void {
    const list = this._list;
    // Rows that just changed (not the first state shown) are marked for a moment.
    const fresh = new Set(diff && !diff.initial ? [...diff.changed, ...diff.added] : []);
    const rows = new Map<string, HTMLLIElement>();
    let position = 0;
    for (const { slot, depth, hasChildren } of state ? slotRows(state.slots) : []) {
      const row = this._rows.get(slot.id) ?? el('li', ROW);
      rows.set(slot.id, row);
      row.className = ROW;
      row.dataset.slotId = slot.id;
      row.setAttribute('role', 'treeitem');
      row.setAttribute('aria-level', String(depth + 1));
      row.setAttribute('aria-selected', String(slot.current));
      if (hasChildren) {
        row.setAttribute('aria-expanded', 'true');
      } else {
        row.removeAttribute('aria-expanded');
      }
      row.tabIndex = 0;
      row.title = slotTooltip(slot);
      row.style.setProperty('--jp-slots-depth', String(depth));
      row.classList.toggle('jp-mod-current', slot.current);
      if (fresh.has(slot.id)) {
        row.classList.add('jp-mod-updated');
        setTimeout(() => row.classList.remove('jp-mod-updated'), FLASH_MS);
      }

      const line = el('div', 'jp-SlotsPanel-line');
      line.append(el('span', 'jp-SlotsPanel-marker', slot.current ? '●' : '○'));
      line.append(el('span', 'jp-SlotsPanel-id', slot.id));
      if (slot.mode !== 'full') {
        line.append(el('span', `jp-SlotsPanel-badge jp-SlotsPanel-mode-${slot.mode}`, slot.mode));
      }
      const counts = countsLabel(slot, {
        showMessages: this._options.showMessageCounts,
        showTokens: this._options.showTokenCounts
      });
      if (counts) {
        line.append(el('span', 'jp-SlotsPanel-counts', counts));
      }
      const content: HTMLElement[] = [line];
      if (this._options.showLastMessage && slot.last_user) {
        content.push(el('div', 'jp-SlotsPanel-lastUser', slot.last_user));
      }
      row.replaceChildren(...content);
      if (list.children[position] !== row) {
        list.insertBefore(row, list.children[position] ?? null);
      }
      position++;
    }
    for (const [id, row] of this._rows) {
      if (!rows.has(id)) {
        row.remove();
      }
    }
    this._rows = rows;
  }

  private _header: HTMLDivElement;
  private _body: HTMLDivElement;
  private _notices: HTMLDivElement;
  private _list: HTMLUListElement;
  private _rows = new Map<string, HTMLLIElement>();
  private _contextSlot: string | null = null;
  private _options: IPanelOptions = { ...DEFAULT_OPTIONS };
}
