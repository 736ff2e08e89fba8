import type { ISlotInfo, IStateMessage } from '../src/protocol';

export function slot(id: string, parent: string | null = null, extra: Partial<ISlotInfo> = {}): ISlotInfo {
  return {
    id,
    parent,
    mode: 'full',
    source: parent ? 'derived' : 'new',
    messages: 0,
    tokens: 0,
    turns: 0,
    current: false,
    last_user: null,
    ...extra
  };
}

export function state(slots: ISlotInfo[], current = slots[0]?.id ?? 'default'): IStateMessage {
  return {
    type: 'state',
    protocol: 1,
    session: 'notes.ipynb',
    current,
    model: 'echo',
    slots: slots.map(s => ({ ...s, current: s.id === current })),
    budget: null,
    workflow: null
  };
}
