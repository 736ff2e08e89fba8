/**
 * The connection to the kernel of the notebook in focus: follows its session context, owns
 * the `slotmagic.sidebar` comm, and holds the latest state. No DOM.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { Signal } from '@lumino/signaling';

import { diffStates, type IStateDiff } from './diff';
import {
  parseKernelMessage,
  TARGET,
  type Action,
  type IErrorMessage,
  type IStateMessage,
  type KernelMessage
} from './protocol';
import { kernelStatus, type PanelStatus } from './status';

/** How long a kernel may leave the comm unanswered before the panel gives up on it. */
const ANSWER_TIMEOUT_MS = 15_000;

export class SlotsModel implements IDisposable {
  /** Emitted after every change; carries what changed in the state, when a state came. */
  readonly changed = new Signal<this, IStateDiff | null>(this);

  get status(): PanelStatus {
    return this._status;
  }

  /** The latest state from the kernel (null until one came, and after the comm closed). */
  get state(): IStateMessage | null {
    return this._state;
  }

  /** The last error the kernel reported, until dismissed or a later action succeeds. */
  get error(): IErrorMessage | null {
    return this._error;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Follow this notebook's session (null: none in focus). */
  follow(context: ISessionContext | null): void {
    if (context === this._context) {
      return;
    }
    if (this._context) {
      this._context.kernelChanged.disconnect(this._onKernelChanged, this);
      this._context.statusChanged.disconnect(this._onStatus, this);
      this._context.iopubMessage.disconnect(this._onIOPub, this);
      this._context.disposed.disconnect(this._onContextDisposed, this);
    }
    this._context = context;
    if (context) {
      context.kernelChanged.connect(this._onKernelChanged, this);
      context.statusChanged.connect(this._onStatus, this);
      context.iopubMessage.connect(this._onIOPub, this);
      context.disposed.connect(this._onContextDisposed, this);
    }
    this._error = null;
    this._followKernel();
  }

  /** Ask the kernel to carry out an action; resolves with its answer (a state or an error). */
  send(action: Action): Promise<KernelMessage> {
    const comm = this._comm;
    if (!comm || comm.isDisposed) {
      return Promise.reject(new Error('slotmagic is not loaded in this kernel'));
    }
    const request = this._nextRequest++;
    return new Promise<KernelMessage>((resolve, reject) => {
      this._pending.set(request, { resolve, reject });
      try {
        comm.send({ ...action, request } as unknown as KM.ICommMsgMsg['content']['data']);
      } catch (reason) {
        this._pending.delete(request);
        reject(reason);
      }
    });
  }

  /** Show an error that did not come from the kernel (e.g. the comm is gone). */
  reportError(message: string): void {
    this._error = { type: 'error', message };
    this.changed.emit(null);
  }

  dismissError(): void {
    if (this._error) {
      this._error = null;
      this.changed.emit(null);
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this.follow(null);
    this._disposed = true;
    Signal.clearData(this);
  }

  // -- following the kernel ------------------------------------------------------------------

  private _onContextDisposed(): void {
    this.follow(null);
  }

  private _onKernelChanged(): void {
    this._followKernel();
  }

  private _onStatus(_context: ISessionContext, status: Kernel.Status): void {
    if (['restarting', 'autorestarting', 'dead', 'starting', 'terminating'].includes(status)) {
      // The kernel's state is gone with it; a restarted kernel must load slotmagic again.
      if (this._status.kind !== 'starting' && this._status.kind !== 'dead') {
        this._retire();
        this._state = null;
        this._setStatus(status === 'dead' ? { kind: 'dead' } : { kind: 'starting' });
      }
    } else if ((status === 'idle' || status === 'busy') && this._status.kind === 'starting') {
      void this._connect(++this._generation);
    } else if (status === 'idle' && this._status.kind === 'dead') {
      void this._connect(++this._generation);
    }
  }

  /**
   * A cell finished while slotmagic was not loaded: it may have run `%load_ext slotmagic`, so
   * ask again (quietly: the hint stays until the kernel answers). The kernel never opens a comm
   * itself, so that a run with no front end (nbconvert --execute) logs no unhandled comm.
   */
  private _onIOPub(_context: ISessionContext, msg: KM.IMessage): void {
    if (
      this._status.kind === 'not-loaded' &&
      !this._comm &&
      msg.header.msg_type === 'status' &&
      (msg as KM.IStatusMsg).content.execution_state === 'idle' &&
      (msg.parent_header as Partial<KM.IHeader>)?.msg_type === 'execute_request'
    ) {
      void this._connect(++this._generation, true);
    }
  }

  private _followKernel(): void {
    this._retire();
    this._state = null;
    this._kernel = this._context?.session?.kernel ?? null;
    void this._connect(++this._generation);
  }

  /** Open a comm to the kernel's target; `quiet` keeps the hint shown while it is asked. */
  private async _connect(generation: number, quiet = false): Promise<void> {
    const context = this._context;
    const kernel = this._kernel;
    const facts = () => ({
      notebook: context !== null,
      kernel: kernel !== null || (context !== null && !context.hasNoKernel),
      status: kernel?.status ?? 'starting',
      language: kernel ? (this._languages.get(kernel) ?? null) : null
    });
    let status = kernelStatus(facts());
    if (kernel && status?.kind === 'starting' && ['idle', 'busy'].includes(kernel.status)) {
      this._setStatus({ kind: 'connecting' });
      try {
        const info = await kernel.info;
        this._languages.set(kernel, info.language_info?.name ?? 'unknown');
      } catch {
        this._languages.set(kernel, 'unknown');
      }
      if (generation !== this._generation) {
        return;
      }
      status = kernelStatus(facts());
    }
    if (status !== null || kernel === null) {
      this._setStatus(status ?? { kind: 'no-kernel' });
      return;
    }
    if (this._comm) {
      return; // asked already
    }
    if (!quiet) {
      this._setStatus({ kind: 'connecting' });
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(TARGET);
    } catch {
      this._setStatus({ kind: 'not-loaded' });
      return;
    }
    this._watch(comm);
    try {
      comm.open({});
    } catch {
      this._retire();
      this._setStatus({ kind: 'not-loaded' });
      return;
    }
    this._awaitAnswer(generation, kernel, comm, quiet ? 'not-loaded' : 'connecting');
  }

  /**
   * A kernel that ignores comms (another kind of kernel speaking Python) never answers: give
   * up after a while, but not while the kernel is busy (it answers once the cell is done).
   */
  private _awaitAnswer(
    generation: number,
    kernel: Kernel.IKernelConnection,
    comm: Kernel.IComm,
    waiting: 'connecting' | 'not-loaded'
  ): void {
    setTimeout(() => {
      if (generation !== this._generation || this._comm !== comm || this._status.kind !== waiting) {
        return;
      }
      if (kernel.status === 'busy') {
        this._awaitAnswer(generation, kernel, comm, waiting);
      } else {
        this._retire();
        this._setStatus({ kind: 'not-loaded' });
      }
    }, ANSWER_TIMEOUT_MS);
  }

  // -- the comm ------------------------------------------------------------------------------

  private _watch(comm: Kernel.IComm): void {
    this._comm = comm;
    comm.onMsg = msg => this._receive(comm, msg.content.data);
    comm.onClose = () => this._closed(comm);
  }

  /** Let go of the comm (closing it if it is open), without treating that as "not loaded". */
  private _retire(): void {
    const comm = this._comm;
    this._comm = null;
    this._rejectPending('the kernel connection changed');
    if (comm && !comm.isDisposed) {
      comm.onClose = () => undefined;
      comm.onMsg = () => undefined;
      try {
        comm.close();
      } catch {
        // the kernel is gone already
      }
    }
  }

  private _closed(comm: Kernel.IComm): void {
    if (comm !== this._comm) {
      return;
    }
    this._comm = null;
    this._state = null;
    this._rejectPending('slotmagic was unloaded from the kernel');
    const kernel = this._kernel;
    const down = kernel && ['dead', 'restarting', 'autorestarting', 'starting'].includes(kernel.status);
    this._setStatus(down ? { kind: kernel.status === 'dead' ? 'dead' : 'starting' } : { kind: 'not-loaded' });
  }

  private _receive(comm: Kernel.IComm, data: unknown): void {
    if (comm !== this._comm) {
      return;
    }
    const message = parseKernelMessage(data);
    if (message === null) {
      return;
    }
    const pending = message.request !== undefined ? this._pending.get(message.request) : undefined;
    if (message.request !== undefined) {
      this._pending.delete(message.request);
    }
    let diff: IStateDiff | null = null;
    if (message.type === 'state') {
      diff = diffStates(this._state, message);
      this._state = message;
      if (pending) {
        this._error = null; // an action succeeded: an earlier error is stale
      }
    } else {
      this._error = message;
    }
    this._status = { kind: 'ready' };
    pending?.resolve(message);
    this.changed.emit(diff);
  }

  private _rejectPending(reason: string): void {
    const pending = [...this._pending.values()];
    this._pending.clear();
    for (const { reject } of pending) {
      reject(new Error(reason));
    }
  }

  private _setStatus(status: PanelStatus): void {
    if (status.kind !== 'ready') {
      this._state = null;
    }
    this._status = status;
    this.changed.emit(null);
  }

  private _context: ISessionContext | null = null;
  private _kernel: Kernel.IKernelConnection | null = null;
  private _comm: Kernel.IComm | null = null;
  private _status: PanelStatus = { kind: 'no-notebook' };
  private _state: IStateMessage | null = null;
  private _error: IErrorMessage | null = null;
  private _generation = 0;
  private _nextRequest = 1;
  private _pending = new Map<number, { resolve: (m: KernelMessage) => void; reject: (e: Error) => void }>();
  private _languages = new WeakMap<Kernel.IKernelConnection, string>();
  private _disposed = false;
}
