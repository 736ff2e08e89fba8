/**
 * The panel's commands: switch to, derive from, rename and delete a slot (the context menu
 * of a row), and refresh.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, InputDialog, showDialog } from '@jupyterlab/apputils';

import type { SlotsModel } from './model';
import type { SlotsPanel } from './panel';
import type { Action, KernelMessage } from './protocol';

export const CommandIDs = {
  switch: 'slotmagic:switch-slot',
  derive: 'slotmagic:derive-slot',
  rename: 'slotmagic:rename-slot',
  delete: 'slotmagic:delete-slot',
  refresh: 'slotmagic:refresh-slots'
};

/** Send an action; an error answer (or a lost comm) shows in the panel's error line. */
export async function runAction(model: SlotsModel, action: Action): Promise<KernelMessage | null> {
  try {
    return await model.send(action);
  } catch (reason) {
    model.reportError(reason instanceof Error ? reason.message : String(reason));
    return null;
  }
}

export function addCommands(app: JupyterFrontEnd, model: SlotsModel, panel: SlotsPanel): void {
  const { commands, contextMenu } = app;
  const slotArg = (args: { slot?: unknown }): string | null =>
    typeof args.slot === 'string' ? args.slot : panel.contextSlot;
  const ready = () => model.status.kind === 'ready' && model.state !== null;
  const known = (args: { slot?: unknown }) => {
    const slot = slotArg(args);
    return ready() && slot !== null && model.state!.slots.some(s => s.id === slot);
  };

  commands.addCommand(CommandIDs.switch, {
    label: 'Switch to Slot',
    caption: 'Make this slot the current one in the kernel',
    isEnabled: args => known(args) && slotArg(args) !== model.state?.current,
    execute: async args => {
      const slot = slotArg(args);
      if (slot) {
        await runAction(model, { type: 'switch', slot });
      }
    }
  });

  commands.addCommand(CommandIDs.derive, {
    label: 'Derive Slot…',
    caption: 'Branch a new slot from this one and switch to it',
    isEnabled: known,
    execute: async args => {
      const slot = slotArg(args);
      if (!slot) {
        return;
      }
      const result = await InputDialog.getText({
        title: `Derive a slot from “${slot}”`,
        label: 'New slot id (letters, digits, - _ .)',
        placeholder: `${slot}-branch`,
        okLabel: 'Derive'
      });
      const name = result.value?.trim();
      if (result.button.accept && name) {
        await runAction(model, { type: 'derive', slot, new: name });
      }
    }
  });

  commands.addCommand(CommandIDs.rename, {
    label: 'Rename Slot…',
    caption: 'Give this slot a new id',
    isEnabled: known,
    execute: async args => {
      const slot = slotArg(args);
      if (!slot) {
        return;
      }
      const result = await InputDialog.getText({
        title: `Rename slot “${slot}”`,
        label: 'New slot id',
        text: slot,
        okLabel: 'Rename'
      });
      const name = result.value?.trim();
      if (result.button.accept && name && name !== slot) {
        await runAction(model, { type: 'rename', slot, new: name });
      }
    }
  });

  commands.addCommand(CommandIDs.delete, {
    label: 'Delete Slot…',
    caption: 'Delete this slot (slots derived from it keep their history)',
    isEnabled: args => known(args) && slotArg(args) !== 'default',
    execute: async args => {
      const slot = slotArg(args);
      if (!slot) {
        return;
      }
      const confirm = await showDialog({
        title: `Delete slot “${slot}”?`,
        body: 'Slots derived from it keep their whole history.',
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
      });
      if (!confirm.button.accept) {
        return;
      }
      const answer = await runAction(model, { type: 'delete', slot, force: false });
      if (answer?.type === 'error' && answer.kind === 'SlotNotEmpty') {
        model.dismissError();
        const again = await showDialog({
          title: `Slot “${slot}” holds turns no other slot has`,
          body: 'Deleting it discards them for good.',
          buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete Anyway' })]
        });
        if (again.button.accept) {
          await runAction(model, { type: 'delete', slot, force: true });
        }
      }
    }
  });

  commands.addCommand(CommandIDs.refresh, {
    label: 'Refresh Slots',
    caption: 'Ask the kernel for its slots again',
    isEnabled: ready,
    execute: async () => {
      await runAction(model, { type: 'refresh' });
    }
  });

  const selector = '.jp-SlotsPanel-row';
  contextMenu.addItem({ command: CommandIDs.switch, selector, rank: 1 });
  contextMenu.addItem({ type: 'separator', selector, rank: 2 });
  contextMenu.addItem({ command: CommandIDs.derive, selector, rank: 3 });
  contextMenu.addItem({ command: CommandIDs.rename, selector, rank: 4 });
  contextMenu.addItem({ command: CommandIDs.delete, selector, rank: 5 });
  contextMenu.addItem({ command: CommandIDs.refresh, selector: '.jp-SlotsPanel', rank: 10 });
}
