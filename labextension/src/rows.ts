/**
 * State → tree rows: each slot under its parent, indented by depth. Pure.
 */
import type { ISlotInfo } from './protocol';

export interface ISlotRow {
  slot: ISlotInfo;
  /** 0 for a root slot, 1 for its children ... */
  depth: number;
  /** Whether slots are derived from this one. */
  hasChildren: boolean;
}

/**
 * Depth-first, children in the order the kernel sent them (creation order). A slot whose
 * parent is not in the list (deleted, or a static slot) is a root. Cycles cannot come from
 * slotmagic, but would not hang the panel: such slots are listed once, as roots.
 */
export function slotRows(slots: readonly ISlotInfo[]): ISlotRow[] {
  const ids = new Set(slots.map(s => s.id));
  const children = new Map<string, ISlotInfo[]>();
  const roots: ISlotInfo[] = [];
  for (const slot of slots) {
    if (slot.parent !== null && slot.parent !== slot.id && ids.has(slot.parent)) {
      const siblings = children.get(slot.parent) ?? [];
      siblings.push(slot);
      children.set(slot.parent, siblings);
    } else {
      roots.push(slot);
    }
  }
  const rows: ISlotRow[] = [];
  const seen = new Set<string>();
  const visit = (slot: ISlotInfo, depth: number): void => {
    if (seen.has(slot.id)) {
      return;
    }
    seen.add(slot.id);
    const kids = children.get(slot.id) ?? [];
    rows.push({ slot, depth, hasChildren: kids.length > 0 });
    for (const kid of kids) {
      visit(kid, depth + 1);
    }
  };
  for (const root of roots) {
    visit(root, 0);
  }
  for (const slot of slots) {
    visit(slot, 0); // only slots caught in a cycle are left
  }
  return rows;
}
