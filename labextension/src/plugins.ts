/**
 * The labextension's application plugins (package.json `jupyterlab.extension`): proposed
 * cell edits on their cells (celledits.ts) and the side panel (panel.ts). The record's
 * MIME renderer is the separate `mimeExtension` (index.ts).
 */

import { cellEditsPlugin } from './celledits';
import { panelPlugin } from './panel';

export default [cellEditsPlugin, panelPlugin];
