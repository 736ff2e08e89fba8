/**
 * The sidebar's comm protocol, version 1: the front end's copy of the kernel's types in
 * `slotmagic/_core/sidebar_protocol.py` (each interface here is a TypedDict there;
 * tests/test_protocol.py checks their fields and the constants below against each other).
 * When the kernel sends what is the docstring of `slotmagic/_magics/sidebar.py`. Pure: no
 * JupyterLab imports.
 *
 * Target `slotmagic.sidebar`, in the kernel: it registers it on `%load_ext slotmagic` and never
 * opens a comm itself (where no front end listens, that would be logged as unhandled). The
 * front end opens a comm to it when it starts following a notebook, after a restart, and, while
 * slotmagic is not loaded, after each cell the kernel ran; a comm the kernel closes at once (no
 * such target) means slotmagic is not loaded there.
 */

export const TARGET = 'slotmagic.sidebar';
export const PROTOCOL = 1;

/** One slot of the session, as the kernel sends it. */
export interface ISlotInfo {
  id: string;
  /** The nearest live ancestor, or null for a root slot. */
  parent: string | null;
  /** 'full' | 'focused' | 'readonly' (shown as sent). */
  mode: string;
  /** 'new' | 'derived' | 'static' */
  source: string;
  messages: number;
  tokens: number;
  turns: number;
  current: boolean;
  /** The first words (at most 80 characters) of the last user message, or null. */
  last_user: string | null;
}

/** A part of the token budget: system, history, tools, tool_results, reserve ... */
export interface IBudgetPart {
  used: number;
  limit: number;
}

/** The current slot's token budget (null until the kernel sends one). */
export interface IBudget {
  window: number | null;
  /** The slot's budget: its own (`--budget`), else the model's window. */
  total?: number | null;
  used: number | null;
  /** Sent keyed by name ({name: part}); `parseBudget` lists them in the order sent. */
  parts: { name: string; part: IBudgetPart }[];
  /** Where compaction starts: history and tool results past this many tokens (null: not sent). */
  threshold?: number | null;
}

/** The workflow's current node (null until the kernel sends one). */
export interface IWorkflow {
  name: string | null;
  current: string | null;
  completed: number | null;
  total: number | null;
  next: string[];
}

/** Kernel → front end: the whole state, after every change. */
export interface IStateMessage {
  type: 'state';
  protocol: number;
  session: string;
  current: string;
  model: string;
  slots: ISlotInfo[];
  budget: IBudget | null;
  workflow: IWorkflow | null;
  /** Echoes the `request` of the action this answers. */
  request?: number;
}

/** Kernel → front end: an action failed (one line, for the user). */
export interface IErrorMessage {
  type: 'error';
  message: string;
  /** The error's class name, e.g. 'SlotNotEmpty', 'SlotNotFound'. */
  kind?: string;
  request?: number;
}

export type KernelMessage = IStateMessage | IErrorMessage;

/** Front end → kernel: send the state again. */
export interface IRefreshAction {
  type: 'refresh';
}

/** Front end → kernel: make `slot` the current slot. */
export interface ISwitchAction {
  type: 'switch';
  slot: string;
}

/** Front end → kernel: derive `new` from `slot` and switch to it, as `%slot derive` does. */
export interface IDeriveAction {
  type: 'derive';
  slot: string;
  new: string;
}

/** Front end → kernel: rename `slot` to `new`. */
export interface IRenameAction {
  type: 'rename';
  slot: string;
  new: string;
}

/** Front end → kernel: delete `slot`; `force` also when it holds turns no other slot shares. */
export interface IDeleteAction {
  type: 'delete';
  slot: string;
  force: boolean;
}

/** Front end → kernel. Each is answered with a `state` or an `error`. */
export type Action = IRefreshAction | ISwitchAction | IDeriveAction | IRenameAction | IDeleteAction;

export type FrontMessage = Action & { request?: number };

// -- validation: the kernel is another program; never trust its shapes --------------------------

type Obj = { [key: string]: unknown };

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function textOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function parseSlot(value: unknown): ISlotInfo | null {
  if (!isObject(value) || typeof value.id !== 'string' || value.id === '') {
    return null;
  }
  return {
    id: value.id,
    parent: textOrNull(value.parent),
    mode: typeof value.mode === 'string' ? value.mode : 'full',
    source: typeof value.source === 'string' ? value.source : 'new',
    messages: count(value.messages),
    tokens: count(value.tokens),
    turns: count(value.turns),
    current: value.current === true,
    last_user: textOrNull(value.last_user)
  };
}

/** The budget if the kernel sent one this panel can read, else null. */
export function parseBudget(value: unknown): IBudget | null {
  if (!isObject(value)) {
    return null;
  }
  const parts: { name: string; part: IBudgetPart }[] = [];
  if (isObject(value.parts)) {
    for (const [name, part] of Object.entries(value.parts)) {
      if (isObject(part) && numberOrNull(part.limit) !== null) {
        parts.push({ name, part: { used: count(part.used), limit: count(part.limit) } });
      }
    }
  }
  const window = numberOrNull(value.window);
  const total = numberOrNull(value.total);
  const used = numberOrNull(value.used);
  if (window === null && used === null && parts.length === 0) {
    return null;
  }
  return { window, total, used, parts, threshold: numberOrNull(value.threshold) };
}

/** The workflow if the kernel sent one this panel can read, else null. */
export function parseWorkflow(value: unknown): IWorkflow | null {
  if (!isObject(value)) {
    return null;
  }
  const workflow: IWorkflow = {
    name: textOrNull(value.name),
    current: textOrNull(value.current),
    completed: numberOrNull(value.completed),
    total: numberOrNull(value.total),
    next: Array.isArray(value.next) ? value.next.filter((n): n is string => typeof n === 'string') : []
  };
  if (workflow.name === null && workflow.current === null && workflow.total === null) {
    return null;
  }
  return workflow;
}

/**
 * A kernel message, checked and normalised; null for anything else. A state of another
 * protocol version becomes an error that says what to do.
 */
export function parseKernelMessage(data: unknown): KernelMessage | null {
  if (!isObject(data)) {
    return null;
  }
  const request = typeof data.request === 'number' ? { request: data.request } : {};
  if (data.type === 'error') {
    const message = typeof data.message === 'string' && data.message ? data.message : 'unknown error';
    const kind = typeof data.kind === 'string' ? { kind: data.kind } : {};
    return { type: 'error', message: message.split('\n')[0], ...kind, ...request };
  }
  if (data.type !== 'state') {
    return null;
  }
  if (data.protocol !== PROTOCOL) {
    return {
      type: 'error',
      message: `the kernel's slotmagic speaks sidebar protocol ${String(data.protocol)}, this panel ${PROTOCOL}: install the same slotmagic version in the kernel and in JupyterLab`,
      ...request
    };
  }
  const slots = Array.isArray(data.slots)
    ? data.slots.map(parseSlot).filter((s): s is ISlotInfo => s !== null)
    : [];
  const current =
    typeof data.current === 'string' ? data.current : (slots.find(s => s.current)?.id ?? '');
  return {
    type: 'state',
    protocol: PROTOCOL,
    session: typeof data.session === 'string' ? data.session : '',
    current,
    model: typeof data.model === 'string' ? data.model : '',
    slots: slots.map(s => ({ ...s, current: s.id === current })),
    budget: parseBudget(data.budget),
    workflow: parseWorkflow(data.workflow),
    ...request
  };
}
