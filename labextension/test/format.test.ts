import assert from 'node:assert/strict';
import { test } from 'node:test';

import { budgetView, countsLabel, formatCount, groupDigits, plural, slotTooltip, workflowLabel } from '../src/format';
import { slot } from './helpers';

test('counts are short', () => {
  const cases: [number, string][] = [
    [0, '0'],
    [7, '7'],
    [999, '999'],
    [1000, '1k'],
    [1234, '1.2k'],
    [1299, '1.2k'],
    [9999, '9.9k'],
    [12345, '12k'],
    [999999, '999k'],
    [1234567, '1.2M'],
    [-5, '0'],
    [NaN, '0']
  ];
  for (const [n, text] of cases) {
    assert.equal(formatCount(n), text, String(n));
  }
});

test('words and digits', () => {
  assert.equal(plural(1, 'turn'), '1 turn');
  assert.equal(plural(0, 'turn'), '0 turns');
  assert.equal(groupDigits(1234567), '1,234,567');
  assert.equal(groupDigits(12), '12');
});

test('a row shows the counts asked for', () => {
  const s = slot('a', null, { messages: 4, tokens: 1234 });
  assert.equal(countsLabel(s, { showMessages: true, showTokens: true }), '4 msg · 1.2k tok');
  assert.equal(countsLabel(s, { showMessages: false, showTokens: true }), '1.2k tok');
  assert.equal(countsLabel(s, { showMessages: false, showTokens: false }), '');
});

test('the tooltip says everything in words', () => {
  const s = slot('court', 'default', { messages: 1, tokens: 12345, turns: 1, current: true, last_user: 'Walk me through' });
  assert.equal(
    slotTooltip(s),
    'court (current)\nmode full, derived from default\n1 message, 12,345 tokens, 1 turn\nlast asked: Walk me through'
  );
  assert.match(slotTooltip(slot('lease', null, { source: 'static' })), /static \(preset messages\)/);
});

test('budget', () => {
  assert.equal(budgetView(null), null);
  const view = budgetView({
    window: 128000,
    used: 3200,
    parts: [
      { name: 'history', part: { used: 3000, limit: 80000 } },
      { name: 'tool_results', part: { used: 30000, limit: 20000 } }
    ]
  });
  assert.deepEqual(view, {
    label: '3.2k of 128k tokens (3%)',
    fraction: 0.025,
    parts: [
      { name: 'history', label: '3k / 80k', fraction: 0.0375, over: null, note: null },
      {
        name: 'tool results',
        label: '30k / 20k',
        fraction: 1,
        over: 'over its share: compacted once history and tool results pass their threshold',
        note:
          'tool results uses 30,000 tokens, more than its share of 20,000. History and tool results share one ' +
          'threshold: past it, older messages are compacted before the next turn.'
      }
    ]
  });
  // the system side past its share takes from the room for history (the threshold, when sent)
  const system = budgetView({
    window: 8192,
    used: 161,
    threshold: 5083,
    parts: [{ name: 'system', part: { used: 124, limit: 37 } }]
  })?.parts[0];
  assert.equal(system?.over, 'over its share: it leaves history less room, so compaction starts sooner');
  assert.equal(
    system?.note,
    'system uses 124 tokens, more than its share of 37. The system side (system prompt and tools) is taken from ' +
      'the room for history and tool results, so compaction starts sooner (5,083 tokens now).'
  );
  assert.equal(budgetView({ window: null, used: 10, parts: [] })?.label, '10 tokens');
  // a slot with a budget of its own: measured against it, not the model's window
  assert.equal(budgetView({ window: 8192, total: 800, used: 250, parts: [] })?.label, '250 of 800 tokens (31%)');
  // no window: the parts' limits add up to it
  assert.equal(budgetView({ window: null, used: null, parts: [{ name: 'system', part: { used: 5, limit: 10 } }] })?.label, '5 of 10 tokens (50%)');
});

test('workflow', () => {
  assert.equal(workflowLabel(null), null);
  assert.equal(
    workflowLabel({ name: 'letter', current: 'draft', completed: 2, total: 5, next: ['review', 'send'] }),
    'letter: draft (2 of 5 done) · next: review, send'
  );
  assert.equal(workflowLabel({ name: null, current: null, completed: 3, total: 3, next: [] }), 'done (3 of 3 done)');
});
