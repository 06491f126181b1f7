/**
 * The phoenix side panel: the active notebook's conversation beside the notebook, in
 * JupyterLab's right sidebar and Notebook 7's right side panel (DESIGN.md decision 23).
 *
 * The panel is a view. It opens one comm (`phoenix.panel`, phoenix_nb/notebook/panel_comm.py)
 * on the active notebook's kernel and draws what the kernel sends with the same record
 * renderer as the cell (render.ts); its buttons call the conversation's own actions over
 * that comm, so the panel, `%phoenix chat` and `%%phoenix` cells are three views of one
 * conversation. A kernel without phoenix loaded closes the comm at once: the panel then
 * says so and offers one button that inserts and runs a visible `%load_ext phoenix_nb`
 * cell (never a silent execute).
 *
 * What is live beside the notebook is in the notebook when shared (decision 16): after a
 * turn the panel started, and after every later turn once it exists, the notebook's
 * "phoenix" cell (made at the end, found again by its metadata `phoenix.panel`) holds the
 * conversation's final record bundle as an ordinary output. It is written through the
 * notebook model, as cell edits are, never to the file behind the editor.
 *
 * Under the record, the list of what waits for a person (panelPending.ts: a mode upgrade,
 * a proposed cell edit with "Show", an MCP server awaiting approval, any kind the kernel's
 * `Phoenix.pending` has), answered by id. A message may carry images pasted or dropped into
 * its box and a cell's outputs ("Attach output", panelAttach.ts), shown as removable chips;
 * the box and the chips are cleared only when the kernel says it took the message, so a
 * refused one (an image it cannot send, a busy conversation) loses nothing.
 *
 * The kernel sends the whole record only on structural changes and streamed text as
 * deltas; the panel appends the deltas to the last cycle (as the kernel's `_with_live_text`
 * does for the cell) and redraws at most once per animation frame.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ToolbarButton } from '@jupyterlab/apputils';
import type { ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import type { JSONObject } from '@lumino/coreutils';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  cellOutputs,
  IAttachment,
  imageBytes,
  MAX_IMAGE_BYTES,
  readImage,
  wireAttachments
} from './panelAttach';
import { asPending, IPendingRequest, PendingList } from './panelPending';
import { arr, Loose, MIME_TYPE, obj } from './record';
import { renderRecord } from './render';

export const PANEL_TARGET = 'phoenix.panel';
export const OPEN_PANEL = 'phoenix:open-panel';
export const PANEL_ID = 'phoenix-panel';
/** Metadata key of the notebook's phoenix record cell. */
export const RECORD_CELL_KEY = 'phoenix';
const LOAD_LINE = '%load_ext phoenix_nb';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
  '<path class="jp-icon3" fill="#616161" d="M12 2c1.8 3 5 4.6 5 8.6 0 2-1 3.6-2.3 4.6' +
  '.3-1.8-.6-3.3-2-4.3.2 2.2-1 3.4-2.3 4-1.3.7-2.4 2-2.4 3.6 0 1.1.4 2 1 2.7C6 20.4 4 17.9 ' +
  '4 14.8c0-3.4 2.5-5 3.6-7.4.5 1.5.3 2.8-.3 4C10 9.7 12 6.6 12 2z"/></svg>';

export const phoenixIcon = new LabIcon({ name: 'phoenix-nb:panel', svgstr: ICON_SVG });

/** The conversation's state as the kernel sends it (panel_comm.py `_status`). */
export interface IStatus {
  slug: string | null;
  state: string;
  words: string;
  mode: string;
  rest: boolean;
  paused: boolean;
  reason: string;
}

const NO_STATUS: IStatus = {
  slug: null,
  state: 'none',
  words: '',
  mode: '',
  rest: true,
  paused: false,
  reason: ''
};

function asStatus(value: unknown): IStatus {
  const v = obj(value);
  return {
    slug: typeof v.slug === 'string' ? v.slug : null,
    state: typeof v.state === 'string' ? v.state : 'none',
    words: typeof v.words === 'string' ? v.words : '',
    mode: typeof v.mode === 'string' ? v.mode : '',
    rest: v.rest !== false,
    paused: v.paused === true,
    reason: typeof v.reason === 'string' ? v.reason : ''
  };
}

/** Where a notebook's link to its kernel stands. */
export type LinkState = 'no-kernel' | 'connecting' | 'not-loaded' | 'loading' | 'ready';

/** The record with text still streaming drawn as AI steps at the end of the last cycle. */
export function withLiveText(record: Loose, live: Map<number, [string, string]>): Loose {
  const cycles = arr(record.cycles).map(c => ({ ...obj(c) }));
  if (live.size === 0 || cycles.length === 0) {
    return record;
  }
  const last = cycles[cycles.length - 1];
  const steps = [...arr(last.steps)];
  [...live.keys()]
    .sort((a, b) => a - b)
    .forEach(index => {
      const [kind, text] = live.get(index) as [string, string];
      steps.push({ kind: 'ai', item: { type: kind, text }, tool_groups: [], streaming: true });
    });
  cycles[cycles.length - 1] = { ...last, steps };
  return { ...record, cycles };
}

/** One notebook's link to its kernel: the comm, and what the kernel last said. */
class NotebookLink {
  state: LinkState = 'connecting';
  status: IStatus = NO_STATUS;
  record: Loose | null = null;
  live = new Map<number, [string, string]>();
  notice = '';
  /** The conversations to switch to (`%phoenix list`), newest first. */
  conversations: Array<{ slug: string; state: string }> = [];
  /** What waits for a person here (the kernel's `pending`), oldest first. */
  pending: IPendingRequest[] = [];
  /** How many messages the kernel took (`sent`): the panel then clears its draft. */
  sent = 0;
  /** The panel sent a turn: its final record goes to the notebook's phoenix cell. */
  keepRecord = false;
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;

  constructor(
    readonly notebook: NotebookPanel,
    private readonly changed: (link: NotebookLink) => void
  ) {
    const session = notebook.sessionContext;
    const attach = (): void => {
      void session.ready.then(() => this.attach(session.session?.kernel ?? null));
    };
    session.kernelChanged.connect(attach);
    session.statusChanged.connect((_sender, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this.comm = null;
        this.setState('not-loaded');
      } else if (status === 'idle' && this.state === 'not-loaded' && this.comm === null) {
        this.open(); // `%load_ext phoenix_nb` may just have run, in any cell
      }
    });
    attach();
    // The kernel's channel follows until the comm closes: say so when the page goes.
    window.addEventListener('beforeunload', () => this.close());
    notebook.disposed.connect(() => this.close());
  }

  /** Close the comm (the page unloads, the notebook closes): the kernel stops following. */
  close(): void {
    const comm = this.comm;
    this.comm = null;
    if (comm !== null && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // the kernel is gone already
      }
    }
  }

  private attach(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this.kernel && this.comm !== null) {
      return;
    }
    this.kernel = kernel;
    this.comm = null;
    if (kernel === null) {
      this.setState('no-kernel');
      return;
    }
    this.open();
  }

  /** Open the panel's comm; a kernel without the target closes it straight away. */
  private open(): void {
    const kernel = this.kernel;
    if (kernel === null || kernel.isDisposed) {
      this.setState('no-kernel');
      return;
    }
    const comm = kernel.createComm(PANEL_TARGET);
    this.comm = comm;
    this.pending = []; // a new channel sends what waits, if anything
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      if (this.comm === comm) {
        this.receive(msg.content.data);
      }
    };
    comm.onClose = () => {
      if (this.comm === comm) {
        // Closed at once: no phoenix in this kernel. Closed later (`%unload_ext`, or the
        // kernel dropped a channel it had too many of): the same, until the kernel next
        // goes idle, when the panel asks again (never in a loop of its own).
        this.comm = null;
        this.setState('not-loaded');
      }
    };
    if (this.state !== 'ready') {
      this.setState(this.state === 'loading' ? 'loading' : 'connecting');
    }
    try {
      comm.open({ type: 'hello' });
    } catch {
      this.comm = null;
      this.setState('not-loaded');
    }
  }

  private setState(state: LinkState): void {
    this.state = state;
    this.changed(this);
  }

  private receive(data: unknown): void {
    const d = obj(data);
    this.state = 'ready';
    if (d.type === 'record') {
      this.status = asStatus(d.status);
      const bundle = obj(d.bundle);
      this.record = obj(bundle[MIME_TYPE]);
      this.live.clear();
      const keep = this.keepRecord || findRecordCell(this.notebook) >= 0;
      if (keep && (d.final === true || this.status.paused)) {
        this.comm?.send({ type: 'bundle' }); // the fallbacks, for the saved output
      }
    } else if (d.type === 'bundle') {
      this.keepInNotebook(obj(d.bundle));
    } else if (d.type === 'delta') {
      for (const part of arr(d.parts)) {
        const [index, kind, text] = arr(part);
        if (typeof index === 'number' && typeof text === 'string') {
          const had = this.live.get(index);
          this.live.set(index, [String(kind), (had ? had[1] : '') + text]);
        }
      }
    } else if (d.type === 'conversations') {
      this.conversations = arr(d.items)
        .map(item => obj(item))
        .filter(item => typeof item.slug === 'string')
        .map(item => ({ slug: String(item.slug), state: String(item.state ?? '') }));
    } else if (d.type === 'pending') {
      this.pending = arr(d.items)
        .map(asPending)
        .filter((item): item is IPendingRequest => item !== null);
    } else if (d.type === 'sent') {
      this.sent += 1;
    } else if (d.type === 'notice' && typeof d.text === 'string') {
      this.notice = d.text;
    } else if (d.type === 'empty') {
      this.status = asStatus(d.status);
      this.record = null;
    }
    this.changed(this);
  }

  send(data: JSONObject): void {
    if (data.type === 'send') {
      this.keepRecord = true;
      this.notice = '';
    }
    this.comm?.send(data);
  }

  /** The final record into the notebook's phoenix cell (decision 16), through the model. */
  private keepInNotebook(bundle: Loose): void {
    const model = this.notebook.content.model;
    if (model === null) {
      return;
    }
    let index = findRecordCell(this.notebook);
    if (index < 0 && !this.keepRecord) {
      return; // turns from cells show their own records; the panel's start the cell
    }
    if (index < 0) {
      const slug = this.status.slug ?? '';
      model.sharedModel.insertCell(model.cells.length, {
        cell_type: 'code',
        source: `%phoenix history ${slug}`.trim(),
        metadata: { [RECORD_CELL_KEY]: { panel: true } }
      });
      index = model.cells.length - 1;
    }
    const cell = model.cells.get(index) as ICodeCellModel;
    const data: Record<string, unknown> = {};
    Object.keys(bundle).forEach(key => (data[key] = bundle[key]));
    cell.outputs.clear();
    cell.outputs.add({
      output_type: 'display_data',
      data: data as never,
      metadata: { phoenix: { panel: true } }
    });
  }

  /** Insert `%load_ext phoenix_nb` as the first cell and run it, for the user to see. */
  async load(): Promise<void> {
    const model = this.notebook.content.model;
    if (model === null) {
      return;
    }
    this.setState('loading');
    model.sharedModel.insertCell(0, { cell_type: 'code', source: LOAD_LINE });
    const content = this.notebook.content;
    content.activeCellIndex = 0;
    await NotebookActions.run(content, this.notebook.sessionContext);
    if (this.comm === null) {
      this.open();
    }
  }
}

/** The index of the notebook's phoenix record cell, or -1. */
export function findRecordCell(notebook: NotebookPanel): number {
  const model = notebook.content.model;
  if (model === null) {
    return -1;
  }
  for (let i = 0; i < model.cells.length; i++) {
    const meta = obj(model.cells.get(i).getMetadata(RECORD_CELL_KEY));
    if (meta.panel === true) {
      return i;
    }
  }
  return -1;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function button(label: string, aria: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', 'jp-Button jp-mod-styled jp-PhoenixPanel-button', label);
  b.type = 'button';
  b.setAttribute('aria-label', aria);
  b.dataset.phoenixAction = label;
  b.addEventListener('click', onClick);
  return b;
}

/** The side panel widget: shows the link of the active notebook. */
export class PhoenixPanel extends Widget {
  private readonly links = new Map<NotebookPanel, NotebookLink>();
  private link: NotebookLink | null = null;
  private readonly statusLine = el('div', 'jp-PhoenixPanel-status');
  private readonly picker = el('select', 'jp-PhoenixPanel-picker');
  private pickerItems = '';
  private readonly prompt = el('div', 'jp-PhoenixPanel-prompt');
  private readonly promptText = el('p', 'jp-PhoenixPanel-promptText');
  private readonly loadButton: HTMLButtonElement;
  private readonly recordHost = el('div', 'jp-PhoenixPanel-record');
  private readonly pendingList: PendingList;
  private readonly chips = el('div', 'jp-PhoenixPanel-attachments');
  private attachments: IAttachment[] = [];
  /** The message the kernel has not yet said it took: [its link, text, attachments, sent count]. */
  private inFlight: [NotebookLink, string, IAttachment[], number] | null = null;
  private readonly notice = el('div', 'jp-PhoenixPanel-notice');
  private readonly input = el('textarea', 'jp-PhoenixPanel-input');
  private readonly sendButton: HTMLButtonElement;
  private readonly cancelButton: HTMLButtonElement;
  private readonly restrictButton: HTMLButtonElement;
  private readonly newButton: HTMLButtonElement;
  private readonly revertButton: HTMLButtonElement;
  private readonly continueButton: HTMLButtonElement;
  private readonly attachButton: HTMLButtonElement;
  private frame = 0;
  private drawn: unknown = null;
  private chipsDrawn: IAttachment[] | null = null;

  constructor(private readonly tracker: INotebookTracker) {
    super();
    this.id = PANEL_ID;
    this.addClass('jp-PhoenixPanel');
    this.title.icon = phoenixIcon;
    this.title.caption = 'phoenix';
    this.title.label = '';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'phoenix conversation');
    // Notebook shortcuts (Enter, Esc, A, B …) must not fire while typing here.
    this.node.dataset.lmSuppressShortcuts = 'true';

    this.picker.setAttribute('aria-label', 'Conversation');
    this.picker.addEventListener('change', () => {
      if (this.picker.value) {
        this.link?.send({ type: 'use', slug: this.picker.value });
      }
    });
    this.statusLine.setAttribute('role', 'status');
    this.statusLine.setAttribute('aria-live', 'polite');
    this.loadButton = button('Load phoenix', 'Load phoenix in this kernel (%load_ext phoenix_nb)', () =>
      void this.link?.load()
    );
    this.prompt.append(this.promptText, this.loadButton);
    this.recordHost.setAttribute('aria-label', 'conversation record');
    this.recordHost.tabIndex = 0;

    this.pendingList = new PendingList({
      answer: (request, answer) =>
        this.link?.send({ type: 'answer', id: request.id, answer }),
      show: (_request, cellId) => this.showCell(cellId)
    });
    this.chips.setAttribute('role', 'list');
    this.chips.setAttribute('aria-label', 'attached to the next message');

    this.notice.setAttribute('role', 'alert');
    this.input.placeholder = 'Ask phoenix… (Enter sends, Shift+Enter new line, Esc cancels)';
    this.input.setAttribute('aria-label', 'Message to phoenix');
    this.input.rows = 3;
    this.input.addEventListener('keydown', event => this.onKey(event));
    this.input.addEventListener('paste', event => this.onPaste(event));
    this.sendButton = button('Send', 'Send the message', () => this.sendMessage());
    this.cancelButton = button('Cancel', 'Cancel the running turn', () => this.act('cancel'));
    this.restrictButton = button('Restrict', 'Back to Restricted (read-only) mode now', () =>
      this.act('restrict')
    );
    this.newButton = button('New', 'Start a new conversation in this notebook', () =>
      this.act('new')
    );
    // %phoenix revert / %phoenix continue: the kernel answers with a notice saying what it did.
    this.revertButton = button(
      'Revert',
      'Revert the latest turn that changed files (put those files back)',
      () => this.act('revert')
    );
    this.continueButton = button(
      'Continue',
      'Continue in a new conversation seeded with a summary of this one',
      () => this.act('continue')
    );
    this.attachButton = button(
      'Attach output',
      "Attach the active cell's output to the next message",
      () => this.attachOutput()
    );
    const buttons = el('div', 'jp-PhoenixPanel-buttons jp-Phoenix-controls');
    buttons.append(
      this.sendButton,
      this.cancelButton,
      this.attachButton,
      this.restrictButton,
      this.newButton,
      this.revertButton,
      this.continueButton
    );
    const composer = el('div', 'jp-PhoenixPanel-composer');
    composer.append(this.chips, this.input, buttons);
    composer.addEventListener('dragover', event => {
      if (event.dataTransfer?.types.includes('Files')) {
        event.preventDefault(); // a drop of files lands here, not in the page
      }
    });
    composer.addEventListener('drop', event => {
      const files = Array.from(event.dataTransfer?.files ?? []);
      if (files.length > 0) {
        event.preventDefault();
        void this.addImages(files);
      }
    });

    this.node.append(
      this.picker,
      this.statusLine,
      this.prompt,
      this.recordHost,
      this.pendingList.node,
      this.notice,
      composer
    );
    tracker.currentChanged.connect(() => this.follow());
    tracker.widgetAdded.connect((_s, panel) => this.linkFor(panel));
    this.follow();
  }

  /** Shown (opened from the palette or the icon, or its sidebar tab chosen): draw. A hidden
   * panel draws nothing (`schedule`), so the page holds one record per conversation. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.follow();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.follow();
  }

  private linkFor(panel: NotebookPanel): NotebookLink {
    let link = this.links.get(panel);
    if (link === undefined) {
      link = new NotebookLink(panel, changed => {
        if (changed === this.link) {
          this.schedule();
        }
      });
      this.links.set(panel, link);
      panel.disposed.connect(() => this.links.delete(panel));
    }
    return link;
  }

  /** Show the active notebook's link (the panel follows the user between notebooks). */
  private follow(): void {
    const current = this.tracker.currentWidget;
    this.link = current === null ? null : this.linkFor(current);
    this.drawn = null;
    this.schedule();
  }

  private schedule(): void {
    if (this.frame === 0 && this.isVisible) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        void this.draw();
      });
    }
  }

  private act(type: string): void {
    this.link?.send({ type });
  }

  private sendMessage(): void {
    const text = this.input.value.trim();
    const link = this.link;
    if (!text || link === null || link.state !== 'ready' || !link.status.rest) {
      return;
    }
    const sent = [...this.attachments];
    this.inFlight = [link, text, sent, link.sent];
    link.send({ type: 'send', text, ...wireAttachments(sent) });
  }

  /** The kernel took the message: clear what was sent (and only that: typing goes on). */
  private clearSent(): void {
    const flight = this.inFlight;
    if (flight === null || flight[0].sent === flight[3]) {
      return;
    }
    const [, text, sent] = flight;
    this.inFlight = null;
    if (this.input.value.trim() === text) {
      this.input.value = '';
    }
    this.attachments = this.attachments.filter(item => !sent.includes(item));
  }

  /** A notice of the panel's own (an attachment refused), where the kernel's notices show. */
  private say(text: string): void {
    if (this.link !== null) {
      this.link.notice = text;
    }
    this.schedule();
  }

  private onPaste(event: ClipboardEvent): void {
    const files = Array.from(event.clipboardData?.files ?? []);
    if (files.length === 0) {
      return;
    }
    if (!event.clipboardData?.types.includes('text/plain')) {
      event.preventDefault(); // an image alone: nothing to paste as text
    }
    void this.addImages(files);
  }

  /** Pasted or dropped files: images become chips; anything else is said, not sent. */
  private async addImages(files: File[]): Promise<void> {
    const refused: string[] = [];
    for (const file of files) {
      if (!file.type.startsWith('image/')) {
        refused.push(`${file.name || 'a file'} is not an image (${file.type || 'unknown type'})`);
        continue;
      }
      if (imageBytes(this.attachments) + file.size > MAX_IMAGE_BYTES) {
        refused.push(
          `${file.name || 'the image'} would make this message's images larger than ` +
            `${MAX_IMAGE_BYTES / 1024 / 1024} MB, more than the kernel's connection takes`
        );
        continue;
      }
      try {
        const image = await readImage(file);
        this.attachments = [...this.attachments, { label: image.name, images: [image], text: '' }];
      } catch (error) {
        refused.push(`${file.name} could not be read (${String(error)})`);
      }
    }
    this.say(refused.length > 0 ? `Not attached: ${refused.join('; ')}.` : '');
  }

  /** "Attach output": the active cell's outputs (text and images) go with the next message. */
  private attachOutput(): void {
    const link = this.link;
    if (link === null) {
      return;
    }
    const found = cellOutputs(link.notebook.content.activeCell);
    if (found === null) {
      this.say('The active cell has no output to attach: select a cell that ran.');
      return;
    }
    if (imageBytes(this.attachments) + imageBytes([found]) > MAX_IMAGE_BYTES) {
      this.say(`Not attached: its images would pass ${MAX_IMAGE_BYTES / 1024 / 1024} MB.`);
      return;
    }
    this.attachments = [...this.attachments, found];
    this.say('');
  }

  /** A request decided on its cell: scroll to the cell and select it (Accept / Reject there). */
  private showCell(cellId: string): void {
    const link = this.link;
    if (link === null) {
      return;
    }
    const content = link.notebook.content;
    const index = content.widgets.findIndex(cell => cell.model.id === cellId);
    if (index < 0) {
      this.say(`That cell (${cellId}) is not in this notebook any more.`);
      return;
    }
    content.deselectAll();
    content.activeCellIndex = index;
    const cell = content.widgets[index];
    void content.scrollToCell(cell, 'center').then(() => {
      // The keyboard to the edit's first button (Accept), or to the cell.
      const target = cell.node.querySelector<HTMLElement>('[data-phoenix-edit] button') ?? cell.node;
      target.focus();
    });
  }

  private drawChips(): void {
    const key = this.attachments; // replaced, never changed in place
    if (this.chipsDrawn === key) {
      return;
    }
    this.chipsDrawn = key;
    this.chips.hidden = key.length === 0;
    this.chips.replaceChildren(
      ...key.map(item => {
        const chip = el('span', 'jp-PhoenixPanel-chip');
        chip.setAttribute('role', 'listitem');
        chip.dataset.phoenixAttachment = item.label;
        const images = item.images.length;
        const what = item.text
          ? images > 0
            ? `${item.label} (text, ${images} image${images > 1 ? 's' : ''})`
            : `${item.label} (text)`
          : item.label;
        chip.appendChild(el('span', 'jp-PhoenixPanel-chipLabel', what));
        const remove = el('button', 'jp-Button jp-PhoenixPanel-chipRemove', '×');
        remove.type = 'button';
        remove.setAttribute('aria-label', `Remove ${item.label}`);
        remove.addEventListener('click', () => {
          this.attachments = this.attachments.filter(other => other !== item);
          this.schedule();
          this.input.focus();
        });
        chip.appendChild(remove);
        return chip;
      })
    );
  }

  private onKey(event: KeyboardEvent): void {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      this.sendMessage();
    } else if (event.key === 'Escape') {
      event.preventDefault();
      if (this.link !== null && !this.link.status.rest && !this.link.status.paused) {
        this.act('cancel');
      }
    }
  }

  /** The conversation picker: rebuilt only when the list changed, so a choice stays put. */
  private drawPicker(items: Array<{ slug: string; state: string }>, status: IStatus): void {
    const key = JSON.stringify([items, status.slug]);
    this.picker.hidden = items.length === 0;
    this.picker.disabled = !status.rest;
    if (key === this.pickerItems) {
      return;
    }
    this.pickerItems = key;
    const options = items.map(item => {
      const option = document.createElement('option');
      option.value = item.slug;
      option.textContent = `${item.slug} (${item.state.replace(/_/g, ' ')})`;
      option.selected = item.slug === status.slug;
      return option;
    });
    this.picker.replaceChildren(...options);
  }

  private async draw(): Promise<void> {
    const link = this.link;
    const state: LinkState | 'no-notebook' = link === null ? 'no-notebook' : link.state;
    this.node.dataset.phoenixPanel = state;
    const ready = link !== null && state === 'ready';
    const status = ready ? link.status : NO_STATUS;
    this.prompt.hidden = ready;
    this.promptText.textContent =
      state === 'no-notebook'
        ? 'Open a notebook: the panel shows its phoenix conversation.'
        : state === 'no-kernel'
          ? 'This notebook has no kernel: start one to talk to phoenix.'
          : state === 'not-loaded'
            ? 'phoenix is not loaded in this notebook\'s kernel. "Load phoenix" adds a ' +
              '%load_ext phoenix_nb cell at the top of the notebook and runs it.'
            : state === 'loading'
              ? 'Loading phoenix in this kernel…'
              : 'Connecting to the kernel…';
    this.loadButton.hidden = state !== 'not-loaded';
    this.statusLine.dataset.phoenixState = ready ? status.state : state;
    this.statusLine.textContent = !ready
      ? 'phoenix'
      : status.slug === null
        ? 'No conversation yet: your first message starts one.'
        : [status.slug, status.words, status.mode].filter(s => s).join(' · ');
    this.drawPicker(ready ? link.conversations : [], status);
    this.pendingList.draw(ready ? link.pending : []);
    this.clearSent();
    this.drawChips();
    const notice = link?.notice ?? '';
    this.notice.textContent = notice;
    this.notice.hidden = !notice;
    this.input.disabled = !ready;
    this.sendButton.disabled = !ready || !status.rest;
    this.cancelButton.hidden = !ready || status.rest || status.paused;
    this.restrictButton.hidden = !ready || status.slug === null || status.mode === 'restricted';
    this.newButton.disabled = !ready || !status.rest;
    this.attachButton.disabled = !ready;
    this.revertButton.hidden = this.continueButton.hidden = !ready || status.slug === null;
    this.revertButton.disabled = !ready || !(status.rest || status.paused);
    this.continueButton.disabled = !ready || !status.rest;
    const record = ready && link.record !== null ? withLiveText(link.record, link.live) : null;
    if (record === this.drawn) {
      return;
    }
    const fresh = this.drawn === null; // another notebook, or the first record
    this.drawn = record;
    if (record === null) {
      this.recordHost.replaceChildren();
      return;
    }
    const atBottom =
      this.recordHost.scrollHeight - this.recordHost.scrollTop - this.recordHost.clientHeight < 40;
    // The record's own look, from its first drawing: a panel never shown holds no record.
    this.recordHost.classList.add('jp-PhoenixConversation');
    await renderRecord(this.recordHost, record);
    if (atBottom || fresh) {
      this.recordHost.scrollTop = this.recordHost.scrollHeight; // follow the stream
    }
  }
}

/** The panel, the command that opens it, and its palette entry. */
export const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: 'phoenix-nb:panel',
  description: "The phoenix side panel: the active notebook's conversation beside it.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    const panel = new PhoenixPanel(tracker);
    app.commands.addCommand(OPEN_PANEL, {
      label: 'phoenix: Open panel',
      caption: "Open the phoenix panel beside the notebook",
      icon: phoenixIcon,
      execute: () => {
        if (!panel.isAttached) {
          app.shell.add(panel, 'right', { rank: 600 });
        }
        app.shell.activateById(panel.id);
        panel.node.querySelector<HTMLTextAreaElement>('textarea')?.focus();
      }
    });
    palette?.addItem({ command: OPEN_PANEL, category: 'phoenix' });
    // A toolbar icon on every notebook (Notebook 7 has no sidebar tab bar to show one).
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (notebook: NotebookPanel) => {
        const open = new ToolbarButton({
          icon: phoenixIcon,
          tooltip: 'phoenix: Open panel',
          label: '',
          onClick: () => void app.commands.execute(OPEN_PANEL)
        });
        open.node.dataset.phoenixOpenPanel = '';
        notebook.toolbar.insertAfter('cellType', 'phoenixOpenPanel', open);
        return open;
      }
    });
    // In JupyterLab this is the sidebar icon; Notebook 7 keeps its right panel closed.
    app.shell.add(panel, 'right', { rank: 600 });
  }
};

export default panelPlugin;
