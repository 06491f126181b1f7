/**
 * The JupyterLab / Notebook 7 MIME extension for phoenix_nb conversation records.
 *
 * It is a plain MIME renderer (no application plugin), so it works wherever
 * JupyterLab's rendermime runs, including Notebook 7 and untrusted notebooks.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { controlsExtension } from './controls';
import { installFocusReturn } from './focus';
import { checkRecord, Loose, MIME_TYPE } from './record';
import { renderRecord } from './render';

installFocusReturn();

const CLASS_NAME = 'jp-PhoenixConversation';

/** Name of the performance entry recorded after each render. */
export const RENDER_MEASURE = 'phoenix-render';

/** Draws one record; re-rendered in place as the kernel updates the display. */
export class RenderedConversation extends Widget implements IRenderMime.IRenderer {
  constructor(_options: IRenderMime.IRendererOptions) {
    super();
    this.addClass(CLASS_NAME);
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[MIME_TYPE];
    const problem = checkRecord(data);
    if (problem !== null) {
      this.showProblem(problem, data);
      return;
    }
    const start = performance.now();
    await renderRecord(this.node, data as Loose);
    // Lets benchmarks read render cost from the page (performance entries named RENDER_MEASURE).
    performance.measure(RENDER_MEASURE, { start, end: performance.now() });
  }

  /** A record we cannot draw is named and shown raw, so nothing in it is lost. */
  private showProblem(problem: string, data: unknown): void {
    const box = document.createElement('div');
    box.className = 'jp-Phoenix-problem';
    box.dataset.phoenixProblem = problem;
    const message = document.createElement('div');
    message.textContent = `phoenix_nb cannot draw this conversation record: ${problem}.`;
    const raw = document.createElement('pre');
    raw.className = 'jp-Phoenix-pre';
    raw.textContent = JSON.stringify(data, null, 2) ?? String(data);
    box.append(message, raw);
    this.node.replaceChildren(box);
  }
}

/** Safe: the renderer runs no payload script, so untrusted notebooks may use it. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new RenderedConversation(options)
};

/** Rank 0 puts the record ahead of its text/html fallback (docs/platform-facts.md). */
const extension: IRenderMime.IExtension = {
  id: 'phoenix-nb:conversation',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

/** With the controls' renderer (controls.ts): a hint where a widget cannot act. */
export default [extension, controlsExtension];
