/**
 * The agent's proposed cell edits, shown on the cells they change, for the human to
 * accept or reject — in JupyterLab and Notebook 7 (both use the same notebook panel).
 *
 * The kernel opens a comm (`phoenix.cell_edits`, phoenix_nb/notebook/cell_edits_comm.py)
 * when it first has an edit; each notebook registers that target on its kernel
 * connection, and after a page reload finds the open comm again and says `hello`, so
 * pending edits come back. An edit is drawn under the input of the cell it names:
 * the diff, the agent's explanation as plain text (model-authored: never HTML, and
 * boxed and labelled so it cannot pass for phoenix's own controls), and Accept /
 * Reject. Accept replaces the cell's source in the live notebook model in one undo
 * step (Ctrl+Z in the cell restores it) and never runs the cell; Reject leaves it.
 * If the cell no longer reads what the agent's edit is against, the edit says so,
 * and Accept first shows the three-way difference (the user's change, the agent's
 * change, and their merge when the two do not overlap) instead of overwriting.
 *
 * The buttons are ordinary buttons in the tab order; a mouse press on them does not
 * take the focus from the notebook (`jp-Phoenix-controls`, focus.ts) and notebook
 * shortcuts do not fire inside the edit (`data-lm-suppress-shortcuts`), so Enter and
 * Space press the focused button.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { PanelLayout, Widget } from '@lumino/widgets';
// node-diff3 is bundled, not shared (package.json `sharedPackages`), and imported from
// its ES module build (webpack.config.js): resolved through its `exports` map alone it
// became an empty module in some builds, and no proposal could be drawn.
import { diff3Merge, diffComm } from 'node-diff3';
import { mark, sourceWarning, splitLines } from './record';

export const TARGET = 'phoenix.cell_edits';

/** One proposal as the kernel sends it (tools/cell_edits.py `CellEdit.to_json`). */
export interface ICellEdit {
  id: string;
  cell_id: string;
  position: 'replace' | 'above' | 'below';
  new_source: string;
  explanation: string;
  base: string;
  execution_count: number | null;
}

type Outcome = 'accepted' | 'rejected' | 'gone';

function asEdit(value: unknown): ICellEdit | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = value as Record<string, unknown>;
  const position = v.position === 'above' || v.position === 'below' ? v.position : 'replace';
  if (typeof v.id !== 'string' || typeof v.cell_id !== 'string') {
    return null;
  }
  if (typeof v.new_source !== 'string') {
    return null;
  }
  return {
    id: v.id,
    cell_id: v.cell_id,
    position,
    new_source: v.new_source,
    explanation: typeof v.explanation === 'string' ? v.explanation : '',
    base: typeof v.base === 'string' ? v.base : '',
    execution_count: typeof v.execution_count === 'number' ? v.execution_count : null
  };
}

/** A cell's lines as the kernel runs them: split where Python's `str.splitlines` splits
 * (IPython splits a cell so before running it), so a carriage return or a line separator
 * starts a new row of the diff instead of hiding inside one. */
function lines(text: string): string[] {
  return splitLines(text);
}

/** A line diff as `[kind, line]` rows: ' ' kept, '-' removed, '+' added. */
export function lineDiff(before: string, after: string): Array<[' ' | '-' | '+', string]> {
  const rows: Array<[' ' | '-' | '+', string]> = [];
  for (const part of diffComm(lines(before), lines(after))) {
    if (part.common) {
      part.common.forEach(line => rows.push([' ', line]));
    } else {
      part.buffer1.forEach(line => rows.push(['-', line]));
      part.buffer2.forEach(line => rows.push(['+', line]));
    }
  }
  return rows;
}

/** The merge of the user's and the agent's changes to `base`, or null when they overlap. */
export function cleanMerge(mine: string, base: string, theirs: string): string | null {
  const merged: string[] = [];
  for (const region of diff3Merge(lines(mine), lines(base), lines(theirs))) {
    if (region.ok === undefined) {
      return null;
    }
    merged.push(...region.ok);
  }
  const text = merged.join('\n');
  return theirs.endsWith('\n') || mine.endsWith('\n') ? `${text}\n` : text;
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

function diffNode(before: string, after: string, label: string): HTMLElement {
  const box = el('div', 'jp-PhoenixEdit-diffBox');
  box.appendChild(el('div', 'jp-PhoenixEdit-diffLabel', label));
  const pre = el('pre', 'jp-PhoenixEdit-diff');
  pre.dataset.phoenixEditDiff = label;
  const warning = sourceWarning(after);
  if (warning) {
    const line = el('div', 'jp-PhoenixEdit-warning', warning);
    line.dataset.phoenixEditWarning = '';
    box.appendChild(line);
  }
  for (const [kind, line] of lineDiff(before, after)) {
    const name = kind === '+' ? 'add' : kind === '-' ? 'del' : 'ctx';
    // hiding characters as their codes (record.ts `mark`): the row shows every character
    const row = el('span', `jp-PhoenixEdit-line jp-PhoenixEdit-${name}`, `${kind} ${mark(line)}`);
    row.dataset.phoenixEditLine = name;
    pre.appendChild(row);
  }
  box.appendChild(pre);
  return box;
}

/** Whether `node` is drawn (not inside a collapsed section or a hidden cell). */
function shown(node: HTMLElement): boolean {
  const check = (node as HTMLElement & { checkVisibility?: () => boolean }).checkVisibility;
  return check !== undefined ? check.call(node) : node.offsetParent !== null;
}

/** One proposal drawn on its cell. */
class EditView extends Widget {
  private threeWay = false;

  constructor(
    readonly edit: ICellEdit,
    readonly cell: Cell,
    private readonly owner: NotebookEdits
  ) {
    super();
    this.addClass('jp-PhoenixEdit');
    this.node.dataset.phoenixEdit = edit.id;
    this.node.setAttribute('data-lm-suppress-shortcuts', 'true');
    this.node.setAttribute('role', 'group');
    this.node.setAttribute('aria-label', 'Cell edit proposed by the phoenix agent');
    cell.model.contentChanged.connect(this.draw, this);
    this.draw();
  }

  dispose(): void {
    if (!this.isDisposed) {
      this.cell.model.contentChanged.disconnect(this.draw, this);
    }
    super.dispose();
  }

  private get live(): string {
    return this.cell.model.sharedModel.getSource();
  }

  /** The cell no longer reads what the agent's edit is against. */
  get conflict(): boolean {
    return this.edit.position === 'replace' && this.live !== this.edit.base;
  }

  draw(): void {
    const edit = this.edit;
    const node = this.node;
    // A keyboard user who pressed one of these buttons keeps the focus in the edit.
    const hadFocus = node.contains(document.activeElement);
    this.drawContent(edit, node);
    if (hadFocus) {
      node.querySelector<HTMLButtonElement>('button')?.focus();
    }
  }

  private drawContent(edit: ICellEdit, node: HTMLElement): void {
    node.replaceChildren();
    node.classList.toggle('jp-PhoenixEdit-conflicted', this.conflict);
    node.dataset.phoenixEditConflict = String(this.conflict);
    const what =
      edit.position === 'replace'
        ? 'The phoenix agent proposes a change to this cell'
        : `The phoenix agent proposes a new cell ${edit.position} this one`;
    node.appendChild(el('div', 'jp-PhoenixEdit-head', `${what} (${edit.id}). It is not run.`));
    if (this.conflict) {
      const run = edit.execution_count !== null ? ` (In [${edit.execution_count}])` : '';
      node.appendChild(
        el(
          'div',
          'jp-PhoenixEdit-conflict',
          `This cell changed since the agent read it${run}. Accept shows both changes ` +
            'before anything is replaced.'
        )
      );
    }
    const why = el('blockquote', 'jp-PhoenixEdit-why');
    why.appendChild(el('div', 'jp-PhoenixEdit-whyLabel', 'Explanation written by the agent:'));
    const words = el('div', 'jp-PhoenixEdit-whyText', edit.explanation);
    words.dataset.phoenixEditExplanation = '';
    why.appendChild(words);
    node.appendChild(why);
    if (this.threeWay && this.conflict) {
      this.drawThreeWay();
      return;
    }
    const before = edit.position === 'replace' ? edit.base : '';
    node.appendChild(diffNode(before, edit.new_source, 'proposed change'));
    const actions = this.actions();
    actions.appendChild(this.button('Accept', 'accept', () => this.accept()));
    actions.appendChild(this.button('Reject', 'reject', () => this.owner.decide(this, 'rejected')));
    const others = this.owner.pendingCount();
    if (others > 1 && this.owner.allShown()) {
      actions.appendChild(
        this.button(`Accept all (${others})`, 'accept-all', () => this.owner.acceptAll())
      );
      actions.appendChild(
        this.button(`Reject all (${others})`, 'reject-all', () => this.owner.rejectAll())
      );
    }
    node.appendChild(actions);
  }

  private drawThreeWay(): void {
    const edit = this.edit;
    const live = this.live;
    const node = this.node;
    const view = el('div', 'jp-PhoenixEdit-threeWay');
    view.dataset.phoenixEditThreeWay = '';
    view.appendChild(diffNode(edit.base, live, 'your change since the agent read the cell'));
    view.appendChild(diffNode(edit.base, edit.new_source, "the agent's change"));
    const merged = cleanMerge(live, edit.base, edit.new_source);
    if (merged !== null) {
      view.appendChild(diffNode(live, merged, 'both changes together (applied to your cell)'));
    } else {
      view.appendChild(
        el('div', 'jp-PhoenixEdit-note', 'The two changes touch the same lines: pick one.')
      );
    }
    node.appendChild(view);
    const actions = this.actions();
    if (merged !== null) {
      actions.appendChild(this.button('Apply both', 'merge', () => this.apply(merged)));
    }
    actions.appendChild(
      this.button("Replace with the agent's version", 'overwrite', () =>
        this.apply(edit.new_source)
      )
    );
    actions.appendChild(
      this.button('Keep mine (reject)', 'reject', () => this.owner.decide(this, 'rejected'))
    );
    node.appendChild(actions);
  }

  private actions(): HTMLElement {
    // `jp-Phoenix-controls`: a mouse press on a button leaves the focus where it was.
    return el('div', 'jp-PhoenixEdit-actions jp-Phoenix-controls');
  }

  private button(label: string, action: string, onClick: () => void): HTMLButtonElement {
    const button = el('button', 'jp-Button jp-PhoenixEdit-button', label);
    button.type = 'button';
    button.dataset.phoenixEditAction = action;
    button.addEventListener('click', event => {
      event.stopPropagation();
      onClick();
    });
    return button;
  }

  /** Accept: apply at once, or show the three-way difference when the cell changed. */
  accept(): boolean {
    if (this.conflict) {
      this.threeWay = true;
      this.draw();
      return false;
    }
    if (this.edit.position === 'replace') {
      this.apply(this.edit.new_source);
    } else {
      this.owner.insert(this);
    }
    return true;
  }

  private apply(text: string): void {
    const shared = this.cell.model.sharedModel;
    const undo = (shared as unknown as { undoManager?: { stopCapturing(): void } | null })
      .undoManager;
    undo?.stopCapturing(); // one undo step of its own, not merged with the user's typing
    shared.setSource(text);
    undo?.stopCapturing();
    this.owner.decide(this, 'accepted', { source: text });
  }
}

/** The edits of one notebook panel, over its kernel's comm. */
class NotebookEdits {
  private comm: Kernel.IComm | null = null;
  private readonly views = new Map<string, EditView>();
  private readonly kernels = new WeakSet<Kernel.IKernelConnection>();

  constructor(private readonly panel: NotebookPanel) {
    const session = panel.sessionContext;
    // Cells must exist before edits are matched to them (an edit whose cell is missing
    // is reported as gone), so wait for the notebook's content as well as the kernel.
    const loaded = Promise.all([panel.context.ready, session.ready]);
    session.kernelChanged.connect(() => {
      void loaded.then(() => this.attach(session.session?.kernel ?? null));
    });
    void loaded.then(() => this.attach(session.session?.kernel ?? null));
    // A restarted kernel has forgotten its edits: the ones shown could not be answered.
    session.statusChanged.connect((_sender, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        [...this.views.keys()].forEach(id => this.drop(id));
      }
    });
    panel.disposed.connect(() => this.views.forEach(view => view.dispose()));
  }

  private attach(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === null || this.kernels.has(kernel)) {
      return;
    }
    this.kernels.add(kernel);
    kernel.registerCommTarget(TARGET, (comm, msg) => {
      this.use(comm);
      this.receive(msg.content.data);
    });
    // After a reload the kernel's comm is already open: find it and ask for the edits.
    void kernel
      .requestCommInfo({ target_name: TARGET })
      .then(reply => {
        const content = reply.content;
        if (content.status !== 'ok') {
          return;
        }
        for (const id of Object.keys(content.comms)) {
          const comm = kernel.createComm(TARGET, id);
          this.use(comm);
          comm.send({ type: 'hello' });
        }
      })
      .catch(() => undefined);
  }

  private use(comm: Kernel.IComm): void {
    this.comm = comm;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => this.receive(msg.content.data);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
      }
    };
  }

  private receive(data: unknown): void {
    if (typeof data !== 'object' || data === null) {
      return;
    }
    const d = data as Record<string, unknown>;
    if (d.type === 'sync' && Array.isArray(d.edits)) {
      d.edits.forEach(e => this.show(asEdit(e)));
    } else if (d.type === 'edit') {
      this.show(asEdit(d.edit));
    } else if (d.type === 'resolved' && typeof d.id === 'string') {
      this.drop(d.id);
    }
  }

  private cell(cellId: string): Cell | null {
    return this.panel.content.widgets.find(c => c.model.id === cellId) ?? null;
  }

  private show(edit: ICellEdit | null): void {
    if (edit === null || this.views.has(edit.id)) {
      return;
    }
    const cell = this.cell(edit.cell_id);
    if (cell === null) {
      this.send(edit.id, 'gone');
      return;
    }
    const view = new EditView(edit, cell, this);
    const layout = cell.layout as PanelLayout;
    // Under the cell's input, above its outputs.
    const input = layout.widgets.findIndex(w => w.hasClass('jp-Cell-inputWrapper'));
    layout.insertWidget(input >= 0 ? input + 1 : layout.widgets.length, view);
    this.views.set(edit.id, view);
    this.redrawAll();
  }

  private drop(id: string): void {
    const view = this.views.get(id);
    if (view !== undefined) {
      const hadFocus = view.node.contains(document.activeElement);
      this.views.delete(id);
      view.dispose();
      this.redrawAll();
      if (hadFocus) {
        // The focused button is gone: give the keyboard back to the notebook, not the page.
        this.panel.content.node.focus();
      }
    }
  }

  private redrawAll(): void {
    this.views.forEach(view => view.draw());
  }

  pendingCount(): number {
    return this.views.size;
  }

  /** Every pending edit is where the user can see it: none sits on a cell hidden in a
   * collapsed section (or otherwise not drawn). Only then is "Accept all" offered: it
   * must never accept a proposal no one was shown. */
  allShown(): boolean {
    return [...this.views.values()].every(view => shown(view.cell.node));
  }

  private send(id: string, outcome: Outcome, extra: Record<string, string> = {}): void {
    this.comm?.send({ type: 'outcome', id, outcome, ...extra });
  }

  decide(view: EditView, outcome: Outcome, extra: Record<string, string> = {}): void {
    this.send(view.edit.id, outcome, extra);
    this.drop(view.edit.id);
  }

  insert(view: EditView): void {
    const notebook = this.panel.content.model;
    if (notebook === null) {
      return;
    }
    const at = this.panel.content.widgets.indexOf(view.cell);
    if (at < 0) {
      this.decide(view, 'gone');
      return;
    }
    const index = view.edit.position === 'above' ? at : at + 1;
    const made = notebook.sharedModel.insertCell(index, {
      cell_type: 'code',
      source: view.edit.new_source
    });
    // A cell inserted next to one in a collapsed section would be hidden in it: the
    // section is opened, so the new code is in sight where it will run.
    const inserted = this.panel.content.widgets.find(c => c.model.id === made.getId());
    if (inserted !== undefined) {
      NotebookActions.expandParent(inserted, this.panel.content);
      if (inserted.inputHidden) {
        inserted.inputHidden = false;
      }
    }
    this.decide(view, 'accepted', { new_cell_id: made.getId(), source: view.edit.new_source });
  }

  /** Every edit whose cell still reads what the agent read and is in sight; conflicts
   * and edits on hidden cells stay for review. */
  acceptAll(): void {
    [...this.views.values()]
      .filter(v => !v.conflict && shown(v.cell.node))
      .forEach(v => v.accept());
  }

  rejectAll(): void {
    [...this.views.values()].forEach(v => this.decide(v, 'rejected'));
  }
}

/** Watches every notebook panel (JupyterLab and Notebook 7) for proposed edits. */
export const cellEditsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'phoenix-nb:cell-edits',
  description: "Shows the phoenix agent's proposed cell edits on the cells, to accept or reject.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const seen = new WeakSet<NotebookPanel>();
    const watch = (panel: NotebookPanel): void => {
      if (!seen.has(panel)) {
        seen.add(panel);
        new NotebookEdits(panel);
      }
    };
    tracker.widgetAdded.connect((_sender, panel) => watch(panel));
    tracker.forEach(watch);
  }
};

export default cellEditsPlugin;
