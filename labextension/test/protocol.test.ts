import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseBudget, parseKernelMessage, parseWorkflow } from '../src/protocol';

const kernelState = {
  type: 'state',
  protocol: 1,
  session: 'deposit.ipynb',
  current: 'court',
  model: 'echo',
  slots: [
    { id: 'default', parent: null, mode: 'full', source: 'new', messages: 2, tokens: 31, turns: 1, current: false, last_user: 'I need help' },
    { id: 'court', parent: 'default', mode: 'focused', source: 'derived', messages: 4, tokens: 70, turns: 2, current: true, last_user: null }
  ],
  budget: null,
  workflow: null
};

test('a state from the kernel is read as is', () => {
  const message = parseKernelMessage(kernelState);
  assert.deepEqual(message, kernelState);
});

test('an answer keeps its request id', () => {
  assert.equal(parseKernelMessage({ ...kernelState, request: 7 })?.request, 7);
  assert.deepEqual(parseKernelMessage({ type: 'error', message: 'no slot', kind: 'SlotNotFound', request: 3 }), {
    type: 'error',
    message: 'no slot',
    kind: 'SlotNotFound',
    request: 3
  });
});

test('junk is ignored, never trusted', () => {
  for (const junk of [null, 3, 'state', [], {}, { type: 'other' }]) {
    assert.equal(parseKernelMessage(junk), null);
  }
  const message = parseKernelMessage({
    type: 'state',
    protocol: 1,
    current: 'a',
    slots: [{ id: 'a', messages: -1, tokens: 'many', last_user: 42 }, { parent: 'a' }, 'x', { id: '' }]
  });
  assert.ok(message && message.type === 'state');
  assert.deepEqual(message.slots, [
    { id: 'a', parent: null, mode: 'full', source: 'new', messages: 0, tokens: 0, turns: 0, current: true, last_user: null }
  ]);
  assert.equal(message.session, '');
});

test('the current flag follows "current", whatever the slots say', () => {
  const message = parseKernelMessage({ ...kernelState, current: 'default' });
  assert.ok(message && message.type === 'state');
  assert.deepEqual(
    message.slots.map(s => s.current),
    [true, false]
  );
});

test('an error is one line', () => {
  assert.deepEqual(parseKernelMessage({ type: 'error', message: 'first\nsecond' }), { type: 'error', message: 'first' });
  assert.deepEqual(parseKernelMessage({ type: 'error' }), { type: 'error', message: 'unknown error' });
});

test('another protocol version says what to do', () => {
  const message = parseKernelMessage({ ...kernelState, protocol: 2 });
  assert.ok(message && message.type === 'error');
  assert.match(message.message, /protocol 2, this panel 1: install the same slotmagic version/);
});

test('budget and workflow are read when present', () => {
  assert.equal(parseBudget(null), null);
  assert.equal(parseBudget({}), null);
  assert.deepEqual(parseBudget({ window: 128000, used: 3200, parts: { history: { used: 3000, limit: 80000 }, bad: 1 } }), {
    window: 128000,
    total: null,
    used: 3200,
    parts: [{ name: 'history', part: { used: 3000, limit: 80000 } }],
    threshold: null
  });
  assert.equal(parseBudget({ window: 8192, total: 800, used: 250, parts: {} })?.total, 800); // a slot's own budget
  assert.equal(parseBudget({ window: 8192, used: 250, threshold: 5083, parts: {} })?.threshold, 5083); // where compaction starts
  assert.equal(parseWorkflow(null), null);
  assert.equal(parseWorkflow({ next: ['a'] }), null);
  assert.deepEqual(parseWorkflow({ current: 'draft', completed: 1, total: 3, next: ['review', 5] }), {
    name: null,
    current: 'draft',
    completed: 1,
    total: 3,
    next: ['review']
  });
});
