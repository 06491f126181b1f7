/**
 * Waiting requests re-offered by the kernel to a page that never had their controls.
 *
 * A turn waiting for approval ends its cell; its outputs (the record and the live
 * controls) are updated by display id after that (controls.ts). A page that has those
 * outputs shows the buttons again after a reload, but a page that never had them — the
 * notebook reopened in a new tab before it was saved, or its outputs cleared — would
 * show nothing to answer. So each notebook opens a comm (`phoenix.pending`,
 * phoenix_nb/notebook/pending_comm.py) on its kernel at connection (again when a
 * phoenix output shows the kernel loaded phoenix later, e.g. after a restart) and the
 * kernel lists what waits, and lists again when that changes. For a request shown in a
 * cell of this notebook whose outputs this page lacks, it asks for them and puts them
 * back into the cell — in the notebook model, so they are saved — where the controls
 * work as in the page that ran the cell. A request whose cell is not found (another
 * notebook's, a deleted cell, a turn without a view) gets a notice above the notebook
 * whose buttons answer it over the comm, by id. The request's reason is the agent's
 * words: shown as text, never HTML.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

export const PENDING_TARGET = 'phoenix.pending';
const RECORD_MIME = 'application/vnd.phoenix.conversation+json';
const ANSWER_WORDS: Record<string, string> = {
  approve: 'Approve',
  deny: 'Deny',
  cancel: 'Cancel'
};

/** One waiting request as the kernel sends it (runtime/pending.py `as_json`). */
export interface IPendingRequest {
  id: string;
  kind: string;
  conversation: string;
  reason: string;
  answers: string[];
  detail: Record<string, string>;
}

function asRequest(value: unknown): IPendingRequest | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = value as Record<string, unknown>;
  if (typeof v.id !== 'string' || typeof v.kind !== 'string') {
    return null;
  }
  const detail: Record<string, string> = {};
  if (typeof v.detail === 'object' && v.detail !== null) {
    for (const [key, item] of Object.entries(v.detail as Record<string, unknown>)) {
      if (typeof item === 'string') {
        detail[key] = item;
      }
    }
  }
  return {
    id: v.id,
    kind: v.kind,
    conversation: typeof v.conversation === 'string' ? v.conversation : '',
    reason: typeof v.reason === 'string' ? v.reason : '',
    answers: Array.isArray(v.answers) ? v.answers.filter(a => typeof a === 'string') : [],
    detail
  };
}

/** Does this kernel message carry a phoenix record (so phoenix is loaded there)? */
function carriesRecord(msg: KernelMessage.IMessage): boolean {
  const content = msg.content as { data?: Record<string, unknown> };
  return typeof content.data === 'object' && content.data !== null && RECORD_MIME in content.data;
}

/** The waiting requests of one notebook panel, over its kernel's comm. */
class NotebookPending {
  private comm: Kernel.IComm | null = null;
  private requests: IPendingRequest[] = [];
  private readonly asked = new Set<string>(); // requests whose outputs were asked for
  private readonly notice = new Widget();
  private refused = '';

  constructor(private readonly panel: NotebookPanel) {
    this.notice.addClass('jp-Phoenix-pendingNotice');
    this.notice.node.dataset.phoenixPendingNotice = '';
    this.notice.hide();
    panel.contentHeader.addWidget(this.notice);
    const session = panel.sessionContext;
    // Cells must exist before a request is matched to its cell.
    const loaded = Promise.all([panel.context.ready, session.ready]);
    session.kernelChanged.connect(() => {
      this.closed();
      void loaded.then(() => this.open());
    });
    void loaded.then(() => this.open());
    session.statusChanged.connect((_sender, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this.closed(); // a restarted kernel has forgotten its requests
      }
    });
    session.iopubMessage.connect((_sender, msg) => {
      if (this.comm === null && carriesRecord(msg)) {
        void loaded.then(() => this.open()); // phoenix was loaded after the connection
      }
    });
  }

  private open(): void {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (kernel === null || this.comm !== null || this.panel.isDisposed) {
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(PENDING_TARGET);
    } catch {
      return; // a disposed connection: the next kernel opens its own
    }
    this.comm = comm;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => this.receive(msg.content.data);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.closed();
      }
    };
    try {
      comm.open({});
    } catch {
      this.closed();
    }
  }

  private closed(): void {
    this.comm = null;
    this.requests = [];
    this.asked.clear();
    this.refused = '';
    this.draw();
  }

  private receive(data: unknown): void {
    if (typeof data !== 'object' || data === null) {
      return;
    }
    const d = data as Record<string, unknown>;
    if (d.type === 'pending' && Array.isArray(d.requests)) {
      this.requests = d.requests
        .map(asRequest)
        .filter((r): r is IPendingRequest => r !== null);
      const ids = new Set(this.requests.map(r => r.id));
      [...this.asked].filter(id => !ids.has(id)).forEach(id => this.asked.delete(id));
      this.refused = '';
      this.draw();
    } else if (d.type === 'outputs' && typeof d.id === 'string' && Array.isArray(d.outputs)) {
      const count = typeof d.execution_count === 'number' ? d.execution_count : null;
      this.putBack(typeof d.cell_id === 'string' ? d.cell_id : '', count, d.outputs);
      this.asked.delete(d.id);
    } else if (d.type === 'refused' && typeof d.text === 'string') {
      this.refused = d.text;
      this.draw();
    }
  }

  private cell(cellId: string): ICodeCellModel | null {
    const model = this.panel.content.model;
    if (!model || !cellId) {
      return null;
    }
    for (const cell of model.cells) {
      if (cell.id === cellId && cell.type === 'code') {
        return cell as ICodeCellModel;
      }
    }
    return null;
  }

  /** Does the cell hold an output of the waiting view (by its display ids)? */
  private shows(cell: ICodeCellModel, ids: readonly string[]): boolean {
    const outputs = cell.outputs;
    for (let i = 0; i < outputs.length; i++) {
      const phoenix = outputs.get(i).metadata?.phoenix as { detached?: unknown } | undefined;
      if (typeof phoenix?.detached === 'string' && ids.includes(phoenix.detached)) {
        return true;
      }
    }
    return false;
  }

  /** The waiting view's outputs (and its count), back in its cell, replacing what the page had there. */
  private putBack(cellId: string, count: number | null, outputs: unknown[]): void {
    const cell = this.cell(cellId);
    if (cell === null || outputs.length === 0) {
      return;
    }
    if (count !== null && cell.executionCount === null) {
      cell.executionCount = count; // its `[n]:` as the page that ran it showed
    }
    // The kernel made these outputs in this session, as when the page runs a cell, which
    // JupyterLab trusts too: the controls' widget is drawn only for trusted outputs.
    cell.trusted = true;
    cell.outputs.clear();
    for (const output of outputs) {
      if (typeof output === 'object' && output !== null) {
        cell.outputs.add(output as Parameters<ICodeCellModel['outputs']['add']>[0]);
      }
    }
    this.draw();
  }

  /** Ask for the outputs this page lacks; a notice for what no cell here can show. */
  private draw(): void {
    const unplaced: IPendingRequest[] = [];
    for (const request of this.requests) {
      if (request.answers.length === 0) {
        continue; // answered elsewhere: a cell edit on its cell (celledits.ts)
      }
      const ids = (request.detail.outputs ?? '').split(' ').filter(Boolean);
      const cell = this.cell(request.detail.cell_id ?? '');
      if (cell === null || ids.length === 0) {
        unplaced.push(request);
        continue;
      }
      if (!this.shows(cell, ids) && !this.asked.has(request.id) && this.comm !== null) {
        this.asked.add(request.id);
        this.comm.send({ type: 'outputs', id: request.id });
      }
    }
    this.drawNotice(unplaced);
  }

  private drawNotice(requests: readonly IPendingRequest[]): void {
    const node = this.notice.node;
    node.replaceChildren();
    for (const request of requests) {
      const row = document.createElement('div');
      row.className = 'jp-Phoenix-pendingRequest jp-Phoenix-controls';
      row.dataset.phoenixPendingRequest = request.id;
      row.setAttribute('data-lm-suppress-shortcuts', 'true');
      const said = document.createElement('p');
      const who = request.conversation ? `${request.conversation} waits` : 'phoenix waits';
      said.textContent = `phoenix: ${who} for your answer (${request.kind.replace(/_/g, ' ')}).`;
      row.append(said);
      if (request.reason) {
        const reason = document.createElement('blockquote');
        reason.className = 'jp-Phoenix-pendingReason';
        reason.textContent = request.reason; // the agent's words: text only
        row.append(reason);
      }
      const buttons = document.createElement('div');
      for (const answer of request.answers) {
        const button = document.createElement('button');
        button.type = 'button';
        button.className = 'jp-Button jp-mod-styled';
        button.textContent = ANSWER_WORDS[answer] ?? answer;
        button.dataset.phoenixPendingAnswer = answer;
        button.addEventListener('click', () => {
          this.comm?.send({ type: 'answer', id: request.id, answer });
        });
        buttons.append(button);
      }
      row.append(buttons);
      node.append(row);
    }
    if (this.refused && requests.length > 0) {
      const line = document.createElement('p');
      line.className = 'jp-Phoenix-pendingRefused';
      line.textContent = this.refused;
      node.append(line);
    }
    if (requests.length > 0) {
      this.notice.show();
      // The header's box layout sizes its children by their CSS minimum: give the notice
      // its content's height, then let the header and the panel make room for it.
      node.style.minHeight = '';
      node.style.minHeight = `${node.scrollHeight}px`;
    } else {
      this.notice.hide();
      node.style.minHeight = '';
    }
    this.panel.contentHeader.fit();
  }
}

/** Watches every notebook panel (JupyterLab and Notebook 7) for waiting requests. */
export const pendingPlugin: JupyterFrontEndPlugin<void> = {
  id: 'phoenix-nb:pending',
  description: "Re-offers the phoenix kernel's waiting requests to a page that lacks them.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const seen = new WeakSet<NotebookPanel>();
    const watch = (panel: NotebookPanel): void => {
      if (!seen.has(panel)) {
        seen.add(panel);
        new NotebookPending(panel);
      }
    };
    tracker.widgetAdded.connect((_sender, panel) => watch(panel));
    tracker.forEach(watch);
  }
};

export default pendingPlugin;
