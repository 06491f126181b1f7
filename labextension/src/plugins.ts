/**
 * The labextension's application plugins (package.json `jupyterlab.extension`): proposed
 * cell edits on their cells (celledits.ts), the side panel (panel.ts) and waiting
 * requests re-offered to a page that lacks them (pending.ts). The record's MIME renderer
 * is the separate `mimeExtension` (index.ts).
 */

import { cellEditsPlugin } from './celledits';
import { panelPlugin } from './panel';
import { pendingPlugin } from './pending';

export default [cellEditsPlugin, panelPlugin, pendingPlugin];
