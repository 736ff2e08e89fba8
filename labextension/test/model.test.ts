import assert from 'node:assert/strict';
import { mock, test } from 'node:test';

import { Signal } from '@lumino/signaling';

import { SlotsModel } from '../src/model';
import { TARGET } from '../src/protocol';

/** The parts of a JupyterLab kernel connection the model uses, with the kernel's side to drive. */
class FakeComm {
  sent: any[] = [];
  closed = false;
  opened: unknown[] = [];
  isDisposed = false;
  onMsg: (msg: any) => void = () => undefined;
  onClose: (msg: any) => void = () => undefined;

  open(data: unknown): void {
    this.opened.push(data);
  }

  send(data: unknown): { done: Promise<void> } {
    this.sent.push(data);
    return { done: Promise.resolve() };
  }

  close(): void {
    this.closed = true;
    this.onClose({ content: {} }); // JupyterLab calls onClose for a local close too
  }

  // the kernel's side
  kernelSends(data: unknown): void {
    this.onMsg({ content: { data } });
  }

  kernelCloses(): void {
    this.onClose({ content: {} });
    this.isDisposed = true;
  }
}

class FakeKernel {
  status = 'idle';
  comms: FakeComm[] = [];
  constructor(readonly language = 'python') {}

  get info(): Promise<any> {
    return Promise.resolve({ language_info: { name: this.language } });
  }

  createComm(target: string): FakeComm {
    assert.equal(target, TARGET);
    const comm = new FakeComm();
    this.comms.push(comm);
    return comm;
  }

}

class FakeContext {
  kernelChanged = new Signal<this, unknown>(this);
  statusChanged = new Signal<this, string>(this);
  iopubMessage = new Signal<this, any>(this);
  disposed = new Signal<this, void>(this);
  hasNoKernel = false;
  session: { kernel: FakeKernel | null } | null;

  constructor(kernel: FakeKernel | null) {
    this.session = kernel ? { kernel } : null;
    this.hasNoKernel = kernel === null;
  }

  /** The kernel went idle after running a cell (`parent` is the request it answered). */
  cellDone(parent = 'execute_request'): void {
    this.iopubMessage.emit({
      header: { msg_type: 'status' },
      parent_header: { msg_type: parent },
      content: { execution_state: 'idle' }
    });
  }

  setStatus(kernel: FakeKernel, status: string): void {
    kernel.status = status;
    this.statusChanged.emit(status);
  }
}

function state(slots: string[], current = slots[0], request?: number): any {
  return {
    type: 'state',
    protocol: 1,
    session: 'nb.ipynb',
    current,
    model: 'echo',
    slots: slots.map(id => ({ id, parent: null, mode: 'full', source: 'new', messages: 0, tokens: 0, turns: 0 })),
    budget: null,
    workflow: null,
    ...(request !== undefined ? { request } : {})
  };
}

/** The status kind, read anew (TypeScript would narrow a property read twice). */
const kind = (model: SlotsModel): string => model.status.kind;

const flush = () => new Promise(resolve => setImmediate(resolve));

async function following(kernel: FakeKernel | null): Promise<{ model: SlotsModel; context: FakeContext }> {
  const model = new SlotsModel();
  const context = new FakeContext(kernel);
  model.follow(context as any);
  await flush();
  return { model, context };
}

test('a Python kernel with slotmagic: the comm answers with the state', async () => {
  const kernel = new FakeKernel();
  const { model } = await following(kernel);
  assert.equal(kind(model), 'connecting');
  const [comm] = kernel.comms;
  assert.ok(comm);
  comm.kernelSends(state(['default']));
  assert.equal(kind(model), 'ready');
  assert.deepEqual(model.state?.slots.map(s => s.id), ['default']);
});

test('a kernel without slotmagic closes the comm: the hint, asked again after each cell', async () => {
  const kernel = new FakeKernel();
  const { model, context } = await following(kernel);
  kernel.comms[0].kernelCloses();
  assert.equal(kind(model), 'not-loaded');
  context.cellDone('kernel_info_request'); // not a cell: not asked again
  await flush();
  assert.equal(kernel.comms.length, 1);
  context.cellDone(); // a cell that did not load slotmagic: the hint stays throughout
  await flush();
  assert.equal(kind(model), 'not-loaded');
  kernel.comms[1].kernelCloses();
  assert.equal(kind(model), 'not-loaded');
  context.cellDone(); // `%load_ext slotmagic`
  await flush();
  assert.equal(kernel.comms.length, 3);
  kernel.comms[2].kernelSends(state(['default', 'b'], 'b'));
  assert.equal(kind(model), 'ready');
  assert.equal(model.state?.current, 'b');
  context.cellDone(); // loaded: no more asking
  await flush();
  assert.equal(kernel.comms.length, 3);
});

test('no kernel, another language: hints, and no comm', async () => {
  assert.equal(kind((await following(null)).model), 'no-kernel');
  const r = new FakeKernel('R');
  const { model } = await following(r);
  assert.deepEqual(model.status, { kind: 'other-language', language: 'R' });
  assert.equal(r.comms.length, 0);
});

test('a restart forgets the state and asks again once the kernel is up', async () => {
  const kernel = new FakeKernel();
  const { model, context } = await following(kernel);
  kernel.comms[0].kernelSends(state(['default']));
  context.setStatus(kernel, 'restarting');
  assert.equal(kind(model), 'starting');
  assert.equal(model.state, null);
  context.setStatus(kernel, 'idle');
  await flush();
  assert.equal(kernel.comms.length, 2);
  kernel.comms[1].kernelCloses(); // slotmagic is not loaded in the new kernel
  assert.equal(kind(model), 'not-loaded');
  context.setStatus(kernel, 'dead');
  assert.equal(kind(model), 'dead');
});

test('an action resolves with its own answer, not with a push', async () => {
  const kernel = new FakeKernel();
  const { model } = await following(kernel);
  const [comm] = kernel.comms;
  comm.kernelSends(state(['default', 'b']));
  const answer = model.send({ type: 'switch', slot: 'b' });
  const sent = comm.sent[0];
  assert.deepEqual({ ...sent, request: undefined }, { type: 'switch', slot: 'b', request: undefined });
  comm.kernelSends(state(['default', 'b', 'c'])); // a push after a cell, first
  comm.kernelSends({ type: 'error', message: 'no slot', kind: 'SlotNotFound', request: sent.request });
  assert.deepEqual(await answer, { type: 'error', message: 'no slot', kind: 'SlotNotFound', request: sent.request });
  assert.equal(model.error?.message, 'no slot');
  assert.deepEqual(model.state?.slots.map(s => s.id), ['default', 'b', 'c']);
  const ok = model.send({ type: 'refresh' });
  comm.kernelSends(state(['default'], 'default', comm.sent[1].request));
  assert.equal((await ok).type, 'state');
  assert.equal(model.error, null); // a later action succeeded
});

test('unloading rejects what is pending and shows the hint', async () => {
  const kernel = new FakeKernel();
  const { model } = await following(kernel);
  const [comm] = kernel.comms;
  comm.kernelSends(state(['default']));
  const pending = model.send({ type: 'refresh' });
  comm.kernelCloses();
  await assert.rejects(pending, /unloaded/);
  assert.equal(kind(model), 'not-loaded');
  await assert.rejects(model.send({ type: 'refresh' }), /not loaded/);
});

test('following another notebook lets go of the first one', async () => {
  const a = new FakeKernel();
  const b = new FakeKernel();
  const { model } = await following(a);
  a.comms[0].kernelSends(state(['a']));
  model.follow(new FakeContext(b) as any);
  await flush();
  assert.ok(a.comms[0].closed);
  b.comms[0].kernelSends(state(['b']));
  assert.deepEqual(model.state?.slots.map(s => s.id), ['b']);
  assert.deepEqual(model.state?.slots.map(s => s.id), ['b']);
  model.follow(null);
  assert.equal(kind(model), 'no-notebook');
});

test('a kernel that never answers: the hint, but not while it is busy', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const kernel = new FakeKernel();
    const { model } = await following(kernel);
    kernel.status = 'busy';
    mock.timers.tick(15_000);
    assert.equal(kind(model), 'connecting');
    kernel.status = 'idle';
    mock.timers.tick(15_000);
    assert.equal(kind(model), 'not-loaded');
    assert.ok(kernel.comms[0].closed);
  } finally {
    mock.timers.reset();
  }
});
