/**
 * What the panel can show for the notebook in focus, and the hint for each case. Pure.
 */

export type PanelStatus =
  | { kind: 'no-notebook' }
  | { kind: 'no-kernel' }
  | { kind: 'starting' }
  | { kind: 'dead' }
  | { kind: 'other-language'; language: string }
  | { kind: 'connecting' }
  | { kind: 'not-loaded' }
  | { kind: 'ready' };

export interface IKernelFacts {
  /** A notebook is being followed. */
  notebook: boolean;
  /** The notebook has a kernel (not "No Kernel"). */
  kernel: boolean;
  /** The kernel's status as JupyterLab reports it ('idle', 'busy', 'dead', 'restarting' ...). */
  status: string;
  /** language_info.name once the kernel told it, else null. */
  language: string | null;
}

/**
 * Where the panel stands before talking to the kernel: a status to show, or null when it
 * should open the comm (a live Python kernel).
 */
export function kernelStatus(facts: IKernelFacts): PanelStatus | null {
  if (!facts.notebook) {
    return { kind: 'no-notebook' };
  }
  if (!facts.kernel) {
    return { kind: 'no-kernel' };
  }
  if (facts.status === 'dead') {
    return { kind: 'dead' };
  }
  if (['unknown', 'starting', 'restarting', 'autorestarting', 'terminating'].includes(facts.status)) {
    return { kind: 'starting' };
  }
  if (facts.language === null) {
    return { kind: 'starting' };
  }
  if (facts.language.toLowerCase() !== 'python') {
    return { kind: 'other-language', language: facts.language };
  }
  return null;
}

export interface IHint {
  title: string;
  detail: string;
  /** Code the user can copy into a cell. */
  code?: string;
}

export function hintFor(status: PanelStatus): IHint | null {
  switch (status.kind) {
    case 'no-notebook':
      return { title: 'No notebook', detail: 'Open a notebook to see its slots.' };
    case 'no-kernel':
      return { title: 'No kernel', detail: 'Select a Python kernel for this notebook to see its slots.' };
    case 'starting':
      return { title: 'Kernel starting', detail: 'The slots show once the kernel is ready.' };
    case 'dead':
      return { title: 'Kernel dead', detail: 'Restart the kernel, then load slotmagic again.', code: '%load_ext slotmagic' };
    case 'other-language':
      return {
        title: 'Not a Python kernel',
        detail: `This notebook's kernel runs ${status.language}; slotmagic runs in Python kernels.`
      };
    case 'connecting':
      return { title: 'Connecting', detail: 'Asking the kernel for its slots…' };
    case 'not-loaded':
      return { title: 'slotmagic is not loaded', detail: 'Run this in the notebook to see its slots here:', code: '%load_ext slotmagic' };
    case 'ready':
      return null;
  }
}
