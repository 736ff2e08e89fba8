import assert from 'node:assert/strict';
import { test } from 'node:test';

import { hintFor, kernelStatus, type PanelStatus } from '../src/status';

const live = { notebook: true, kernel: true, status: 'idle', language: 'python' };

test('a live Python kernel: open the comm', () => {
  assert.equal(kernelStatus(live), null);
  assert.equal(kernelStatus({ ...live, status: 'busy', language: 'Python' }), null);
});

test('every other case has a hint, and none breaks', () => {
  const cases: [object, string][] = [
    [{ ...live, notebook: false }, 'no-notebook'],
    [{ ...live, kernel: false }, 'no-kernel'],
    [{ ...live, status: 'dead' }, 'dead'],
    [{ ...live, status: 'restarting' }, 'starting'],
    [{ ...live, status: 'unknown' }, 'starting'],
    [{ ...live, language: null }, 'starting'],
    [{ ...live, language: 'R' }, 'other-language']
  ];
  for (const [facts, kind] of cases) {
    const status = kernelStatus({ ...live, ...facts });
    assert.equal(status?.kind, kind, JSON.stringify(facts));
    const hint = hintFor(status!);
    assert.ok(hint && hint.title && hint.detail, kind);
  }
});

test('the hints say what to do', () => {
  assert.deepEqual(hintFor({ kind: 'not-loaded' }), {
    title: 'slotmagic is not loaded',
    detail: 'Run this in the notebook to see its slots here:',
    code: '%load_ext slotmagic'
  });
  assert.match(hintFor({ kind: 'other-language', language: 'R' })!.detail, /runs R; slotmagic runs in Python kernels/);
  const ready: PanelStatus = { kind: 'ready' };
  assert.equal(hintFor(ready), null);
});
