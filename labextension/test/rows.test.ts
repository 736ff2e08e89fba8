import assert from 'node:assert/strict';
import { test } from 'node:test';

import { slotRows } from '../src/rows';
import { slot } from './helpers';

const shape = (rows: ReturnType<typeof slotRows>) => rows.map(r => `${'  '.repeat(r.depth)}${r.slot.id}${r.hasChildren ? '/' : ''}`);

test('children under their parent, in the order sent', () => {
  const rows = slotRows([
    slot('default'),
    slot('court', 'default'),
    slot('short', 'court'),
    slot('negotiate', 'default'),
    slot('lease'),
    slot('court.2', 'court')
  ]);
  assert.deepEqual(shape(rows), ['default/', '  court/', '    short', '    court.2', '  negotiate', 'lease']);
});

test('a slot whose parent is gone is a root', () => {
  assert.deepEqual(shape(slotRows([slot('default'), slot('orphan', 'deleted')])), ['default', 'orphan']);
});

test('a child listed before its parent still goes under it', () => {
  assert.deepEqual(shape(slotRows([slot('b', 'a'), slot('a')])), ['a/', '  b']);
});

test('cycles do not hang and list every slot once', () => {
  const rows = slotRows([slot('a', 'b'), slot('b', 'a'), slot('self', 'self')]);
  assert.deepEqual(rows.map(r => r.slot.id).sort(), ['a', 'b', 'self']);
});

test('no slots, no rows', () => {
  assert.deepEqual(slotRows([]), []);
});
