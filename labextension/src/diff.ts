/**
 * What changed between two states, so the panel can mark rows that just changed. Pure.
 */
import type { ISlotInfo, IStateMessage } from './protocol';

export interface IStateDiff {
  /** There was no state before this one. */
  initial: boolean;
  added: string[];
  removed: string[];
  /** Slots present in both whose counts, mode, parent or last message changed. */
  changed: string[];
  currentChanged: boolean;
  /** Nothing the panel shows differs. */
  same: boolean;
}

function slotKey(slot: ISlotInfo): string {
  return JSON.stringify([slot.parent, slot.mode, slot.source, slot.messages, slot.tokens, slot.turns, slot.last_user]);
}

export function diffStates(previous: IStateMessage | null, next: IStateMessage): IStateDiff {
  const before = new Map((previous?.slots ?? []).map(s => [s.id, slotKey(s)]));
  const after = new Map(next.slots.map(s => [s.id, slotKey(s)]));
  const added = next.slots.filter(s => !before.has(s.id)).map(s => s.id);
  const removed = [...before.keys()].filter(id => !after.has(id));
  const changed = next.slots.filter(s => before.has(s.id) && before.get(s.id) !== after.get(s.id)).map(s => s.id);
  const currentChanged = previous === null || previous.current !== next.current;
  const same =
    previous !== null &&
    !added.length &&
    !removed.length &&
    !changed.length &&
    !currentChanged &&
    previous.session === next.session &&
    previous.model === next.model &&
    previous.slots.map(s => s.id).join('\n') === next.slots.map(s => s.id).join('\n') &&
    JSON.stringify([previous.budget, previous.workflow]) === JSON.stringify([next.budget, next.workflow]);
  return { initial: previous === null, added, removed, changed, currentChanged, same };
}
