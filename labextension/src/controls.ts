/**
 * phoenix controls that outlive their kernel, and outputs the kernel keeps updating.
 *
 * A control phoenix leaves in a notebook (the chat's input and buttons, a Revert
 * button) is displayed with `application/vnd.phoenix.controls+json` beside the
 * ipywidgets view: `{hint}`, what to run where the widget cannot act. This renderer
 * ranks ahead of the widget view; it draws the widget through the notebook's own
 * widget renderer while its kernel can act, and the hint when it cannot (a restarted
 * kernel, a reloaded page whose kernel is gone: "model not found", a closed widget).
 *
 * Outputs whose metadata carries `phoenix.detached` (the chat's transcript, a
 * control's hint, a `%%phoenix` cell's record and controls while its turn waits for
 * an answer) are updated by the kernel after their cell ended. JupyterLab routes
 * `update_display_data` only to cells still running, so once a control is on the page
 * this module listens to the notebook's kernel messages and applies such updates to
 * the output holding that id — the notebook model, which is what is saved. An update
 * marked `live` comes from a cell still running (JupyterLab applies it); one marked
 * `gone` removes its outputs (a turn's controls once the turn rests).
 */

import { MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { Message as LuminoMessage } from '@lumino/messaging';
import { Panel, Widget } from '@lumino/widgets';

export const CONTROLS_MIME = 'application/vnd.phoenix.controls+json';
const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';
const WIDGET_RETRY_MS = 250;
const WIDGET_RETRIES = 240; // a minute: a busy machine may take that long to load ipywidgets
const WIDGET_RENEWALS = 12; // ~1.5 minutes of fresh renderers before the hint is final

/* The few JupyterLab objects this module reaches by walking up from the output; typed
 * by what is used, so the extension needs no notebook package. */
interface Registry {
  mimeTypes: readonly string[];
  createRenderer(mimeType: string): IRenderMime.IRenderer;
}
interface PhoenixMetadata {
  detached?: unknown;
  live?: unknown;
  gone?: unknown;
}
interface OutputItem {
  metadata?: { phoenix?: PhoenixMetadata };
}
interface Outputs {
  length: number;
  get(index: number): OutputItem;
  set(index: number, value: unknown): void;
  add(value: unknown): number;
  clear(wait?: boolean): void;
  toJSON(): unknown[];
}
interface CellModel {
  type: string;
  outputs?: Outputs;
}
interface NotebookModel {
  cells: Iterable<CellModel>;
}
interface Message {
  header: { msg_type: string };
  content: {
    data?: unknown;
    metadata?: { phoenix?: PhoenixMetadata };
  };
}
interface Signal<T> {
  connect(slot: (sender: unknown, args: T) => void): boolean;
}
interface SessionContext {
  iopubMessage: Signal<Message>;
}

const listening = new WeakSet<object>();

/** Apply a detached display's update to every output of the notebook holding its id. */
export function applyDetached(model: NotebookModel, msg: Message): number {
  if (msg.header.msg_type !== 'update_display_data') {
    return 0;
  }
  const phoenix = msg.content.metadata?.phoenix;
  const id = phoenix?.detached;
  if (typeof id !== 'string' || phoenix?.live === true) {
    return 0; // a cell still running: JupyterLab routes its updates itself
  }
  let applied = 0;
  for (const cell of model.cells) {
    const outputs = cell.type === 'code' ? cell.outputs : undefined;
    if (!outputs) {
      continue;
    }
    if (phoenix?.gone === true) {
      applied += removeOutputs(outputs, id);
      continue;
    }
    for (let i = 0; i < outputs.length; i++) {
      if (outputs.get(i).metadata?.phoenix?.detached === id) {
        outputs.set(i, {
          output_type: 'display_data',
          data: msg.content.data ?? {},
          metadata: msg.content.metadata ?? {}
        });
        applied++;
      }
    }
  }
  return applied;
}

/** Remove the outputs holding `id` (a turn's controls once it rests after its cell ended). */
function removeOutputs(outputs: Outputs, id: string): number {
  const all = outputs.toJSON() as OutputItem[];
  const kept = all.filter(o => o.metadata?.phoenix?.detached !== id);
  if (kept.length === all.length) {
    return 0;
  }
  outputs.clear();
  kept.forEach(o => outputs.add(o));
  return all.length - kept.length;
}

/** The first ancestor (lumino parents) with a property `name`, e.g. the notebook panel. */
function ancestorWith(widget: Widget, name: string): unknown {
  for (let w: Widget | null = widget.parent; w !== null; w = w.parent) {
    const value = (w as unknown as Record<string, unknown>)[name];
    if (value !== undefined && value !== null) {
      return value;
    }
  }
  return undefined;
}

/** Listen once per notebook panel for the kernel's detached updates. */
function listenForDetached(from: Widget): void {
  for (let w: Widget | null = from.parent; w !== null; w = w.parent) {
    const panel = w as unknown as {
      sessionContext?: SessionContext;
      content?: { model?: NotebookModel | null };
    };
    if (panel.sessionContext?.iopubMessage && panel.content) {
      if (!listening.has(panel)) {
        listening.add(panel);
        panel.sessionContext.iopubMessage.connect((_sender, msg) => {
          const model = panel.content?.model;
          if (model) {
            applyDetached(model, msg);
          }
        });
      }
      return;
    }
  }
}

/** The hint with `backticked` commands as code, built from text nodes only. */
function hintNode(hint: string): HTMLElement {
  const node = document.createElement('p');
  node.className = 'jp-Phoenix-controlHint';
  hint.split('`').forEach((part, i) => {
    if (i % 2 === 1) {
      const code = document.createElement('code');
      code.textContent = part;
      node.append(code);
    } else {
      node.append(document.createTextNode(part));
    }
  });
  return node;
}

/** A control: the live widget while its kernel can act, else the line saying what to run. */
export class RenderedControls extends Panel implements IRenderMime.IRenderer {
  private hint = document.createElement('div');
  private widgetRenderer: IRenderMime.IRenderer | null = null;
  private observer: MutationObserver | null = null;
  private view: Record<string, unknown> | null = null;
  private trusted = false;
  private retries = 0;
  private renewals = 0;

  constructor() {
    super();
    this.addClass('jp-Phoenix-controlOutput');
    this.node.append(this.hint);
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const spec = model.data[CONTROLS_MIME] as { hint?: unknown } | undefined;
    const hint = typeof spec?.hint === 'string' ? spec.hint : '';
    this.hint.replaceChildren(hintNode(hint));
    const view = model.data[WIDGET_VIEW];
    this.view = view && typeof view === 'object' ? { ...(view as object) } : null;
    this.trusted = model.trusted;
    this.attachWidget();
    this.sync();
  }

  protected onAfterAttach(msg: LuminoMessage): void {
    super.onAfterAttach(msg);
    listenForDetached(this);
    this.attachWidget();
    this.sync();
  }

  dispose(): void {
    this.observer?.disconnect();
    super.dispose();
  }

  /** The widget, drawn by the notebook's ipywidgets renderer (found once attached). */
  private attachWidget(): void {
    if (this.widgetRenderer !== null || this.view === null || !this.trusted) {
      return;
    }
    const registry = ancestorWith(this, 'rendermime') as Registry | undefined;
    if (!registry || !registry.mimeTypes.includes(WIDGET_VIEW)) {
      // Not attached yet, or the widget manager not added yet: in a reloaded page or a
      // second tab the saved outputs are drawn before ipywidgets registers its renderer
      // on the notebook, so look again for a while; meanwhile (and without ipywidgets)
      // the hint says what to run.
      if (registry && this.retries < WIDGET_RETRIES && !this.isDisposed) {
        this.retries++;
        window.setTimeout(() => {
          this.attachWidget();
          this.sync();
        }, WIDGET_RETRY_MS);
      }
      return;
    }
    const renderer = registry.createRenderer(WIDGET_VIEW);
    this.widgetRenderer = renderer;
    this.addWidget(renderer);
    this.observer = new MutationObserver(() => this.sync());
    this.observer.observe(renderer.node, {
      childList: true,
      subtree: true,
      attributeFilter: ['class']
    });
    const data = { [WIDGET_VIEW]: this.view } as unknown as IRenderMime.IMimeModel['data'];
    void renderer
      .renderModel(new MimeModel({ data, trusted: true }))
      .then(() => this.sync())
      .catch(() => this.sync());
    this.checkLater();
  }

  /**
   * A renderer made while the page loads may never draw: ipywidgets first registers a
   * placeholder renderer and later gives its manager only to the renderers it finds as
   * direct children of output areas, which this nested one is not (it stayed "Loading
   * widget..." after every reload). So a renderer that has drawn nothing after a while
   * is replaced by a fresh one from the registry, which by then carries the manager.
   */
  private checkLater(): void {
    const delay = Math.min(WIDGET_RETRY_MS * 4 * 2 ** this.renewals, 8000);
    window.setTimeout(() => {
      const renderer = this.widgetRenderer as (Widget & { widgets?: readonly Widget[] }) | null;
      if (this.isDisposed || renderer === null || (renderer.widgets?.length ?? 0) > 0) {
        return;
      }
      if (this.renewals >= WIDGET_RENEWALS) {
        return; // the hint stays: the kernel cannot act (restarted, gone)
      }
      this.renewals++;
      this.observer?.disconnect();
      this.observer = null;
      renderer.dispose();
      this.widgetRenderer = null;
      this.attachWidget();
      this.sync();
    }, delay);
  }

  /** Hint or widget: the widget counts only once it has drawn a view that is not hidden. */
  private sync(): void {
    const renderer = this.widgetRenderer as (Widget & { widgets?: readonly Widget[] }) | null;
    // A restarted kernel leaves the views drawn but disconnected (ipywidgets marks them
    // `jupyter-widgets-disconnected`): they cannot act, so the hint shows instead.
    const alive =
      renderer !== null &&
      !renderer.isHidden &&
      (renderer.widgets?.length ?? 0) > 0 &&
      renderer.node.querySelector('.jupyter-widgets-disconnected') === null;
    this.hint.hidden = alive;
    this.node.dataset.phoenixControl = alive ? 'live' : 'hint';
    if (renderer !== null) {
      renderer.node.style.display = alive ? '' : 'none';
    }
  }
}

export const controlsRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [CONTROLS_MIME],
  defaultRank: -20,
  createRenderer: () => new RenderedControls()
};

/** Ranked ahead of ipywidgets' widget view (-10), which would show "model not found". */
export const controlsExtension: IRenderMime.IExtension = {
  id: 'phoenix-nb:controls',
  rendererFactory: controlsRendererFactory,
  rank: -20,
  dataType: 'json'
};
