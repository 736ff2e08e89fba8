import { LabIcon } from '@jupyterlab/ui-components';

/** A small branching tree: the sidebar tab's icon (themed through jp-icon3). */
export const slotsIcon = new LabIcon({
  name: 'slotmagic:slots',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161">' +
    '<circle cx="6" cy="5" r="2.6"/><circle cx="6" cy="19" r="2.6"/><circle cx="18" cy="12" r="2.6"/>' +
    '<rect x="5" y="6" width="2" height="12"/>' +
    '<path d="M6 10.5c0 1.2 1 1.5 2.5 1.5H16v-1.6H8.5c-.6 0-.9-.2-.9-.6V8H6z"/>' +
    '</g></svg>'
});
