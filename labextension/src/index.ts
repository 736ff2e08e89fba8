/**
 * slotmagic's JupyterLab extension: a "Slots" panel in the left sidebar showing the slot
 * tree of the notebook in focus. This file only wires the plugin together.
 */
import { ILayoutRestorer, type JupyterFrontEnd, type JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { addCodeButtons } from './codecells';
import { addCommands, runAction } from './commands';
import { slotsIcon } from './icon';
import { SlotsModel } from './model';
import { DEFAULT_OPTIONS, SlotsPanel, type IPanelOptions } from './panel';

const PLUGIN_ID = 'slotmagic:plugin';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'A sidebar showing the slot tree of the notebook in focus, live from its kernel.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    settings: ISettingRegistry | null,
    restorer: ILayoutRestorer | null
  ) => {
    const model = new SlotsModel();
    const panel = new SlotsPanel(model, slot => {
      if (slot !== model.state?.current) {
        void runAction(model, { type: 'switch', slot });
      }
    });
    panel.id = 'slotmagic-slots';
    panel.title.icon = slotsIcon;
    panel.title.caption = 'Slots';
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'slotmagic-slots');
    addCommands(app, model, panel);
    addCodeButtons(tracker);  // "copy into a new cell" on each code block of a reply

    const follow = () => model.follow(tracker.currentWidget?.sessionContext ?? null);
    tracker.currentChanged.connect(follow);
    follow();

    if (settings) {
      void settings.load(PLUGIN_ID).then(loaded => {
        const apply = () => {
          const options = { ...DEFAULT_OPTIONS };
          for (const key of Object.keys(DEFAULT_OPTIONS) as (keyof IPanelOptions)[]) {
            const value = loaded.get(key).composite;
            if (typeof value === 'boolean') {
              options[key] = value;
            }
          }
          panel.options = options;
        };
        loaded.changed.connect(apply);
        apply();
      }).catch(reason => console.warn('slotmagic: the panel settings could not be loaded', reason));
    }
  }
};

export default plugin;
