import assert from 'node:assert/strict';
import { test } from 'node:test';

import { diffStates } from '../src/diff';
import { slot, state } from './helpers';

test('the first state: everything is new', () => {
  const d = diffStates(null, state([slot('default')]));
  assert.equal(d.initial, true);
  assert.deepEqual(d.added, ['default']);
  assert.equal(d.same, false);
});

test('the same state again changes nothing', () => {
  const a = state([slot('default'), slot('b', 'default')]);
  const d = diffStates(a, structuredClone(a));
  assert.equal(d.same, true);
  assert.deepEqual([d.added, d.removed, d.changed, d.currentChanged], [[], [], [], false]);
});

test('a turn changes one slot', () => {
  const a = state([slot('default'), slot('b', 'default')]);
  const b = state([slot('default'), slot('b', 'default', { messages: 2, tokens: 20, turns: 1, last_user: 'hi' })]);
  const d = diffStates(a, b);
  assert.deepEqual(d.changed, ['b']);
  assert.equal(d.same, false);
  assert.equal(d.initial, false);
});

test('derive, delete and switch', () => {
  const a = state([slot('default'), slot('b', 'default')]);
  const b = state([slot('default'), slot('c', 'default')], 'c');
  const d = diffStates(a, b);
  assert.deepEqual([d.added, d.removed, d.changed, d.currentChanged], [['c'], ['b'], [], true]);
});

test('a new model or budget is a change too', () => {
  const a = state([slot('default')]);
  assert.equal(diffStates(a, { ...a, model: 'openai:gpt-4o-mini' }).same, false);
  assert.equal(diffStates(a, { ...a, budget: { window: 1, used: 1, parts: [] } }).same, false);
});
