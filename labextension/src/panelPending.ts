/**
 * The panel's list of what waits for a person: the kernel's `Phoenix.pending`
 * (phoenix_nb/runtime/pending.py) as the panel's comm sends it, the notebook's conversation's
 * requests and the whole kernel's (an MCP server awaiting approval).
 *
 * The kinds are an open set, so the list is generic: every request shows its kind, its detail
 * and its reason, and one button per word in its `answers`, answered by the request's id. A few
 * kinds have phoenix's own sentence and names for assistive technology (a mode upgrade, a
 * proposed cell edit); any other kind is drawn the same way with no change here. A request
 * with no answers but a `cell_id` (a proposed cell edit) is decided on its cell, where the
 * diff and Accept / Reject are (celledits.ts): "Show" goes there.
 *
 * Everything the kernel sends here (reason, detail) comes from the agent or a server: it is
 * set as text, quoted, never parsed as markup.
 */

import { obj } from './record';

export const MODE_APPROVAL = 'mode_approval';
export const CELL_EDIT = 'cell_edit';

/** One request as the kernel sends it (pending.py `PendingRequest.as_json`). */
export interface IPendingRequest {
  id: string;
  kind: string;
  conversation: string;
  reason: string;
  answers: string[];
  detail: Record<string, string>;
}

export function asPending(value: unknown): IPendingRequest | null {
  const v = obj(value);
  if (typeof v.id !== 'string' || typeof v.kind !== 'string') {
    return null;
  }
  const detail: Record<string, string> = {};
  Object.entries(obj(v.detail)).forEach(([key, item]) => {
    if (typeof item === 'string') {
      detail[key] = item;
    }
  });
  return {
    id: v.id,
    kind: v.kind,
    conversation: typeof v.conversation === 'string' ? v.conversation : '',
    reason: typeof v.reason === 'string' ? v.reason : '',
    answers: Array.isArray(v.answers)
      ? v.answers.filter((a): a is string => typeof a === 'string')
      : [],
    detail
  };
}

/** What the list asks of the panel. */
export interface IPendingActions {
  answer(request: IPendingRequest, answer: string): void;
  show(request: IPendingRequest, cellId: string): void;
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

const words = (kind: string): string => kind.replace(/_/g, ' ');
const capital = (word: string): string => word.charAt(0).toUpperCase() + word.slice(1);

/** The sentence above a request, its group's name, and each answer's label and name. */
function describe(request: IPendingRequest): {
  head: string;
  group: string;
  label: (answer: string) => [string, string];
} {
  if (request.kind === MODE_APPROVAL) {
    const names: Record<string, [string, string]> = {
      approve: ['Approve', 'Approve the upgrade to Unrestricted mode'],
      deny: ['Deny', 'Deny the upgrade and stay Restricted'],
      cancel: ['Cancel turn', 'Cancel the turn that asks']
    };
    return {
      head:
        'phoenix asks to leave Restricted mode: with Unrestricted it may write files and use ' +
        'the network. The agent gives this reason:',
      group: 'upgrade request',
      label: answer => names[answer] ?? [capital(answer), `${capital(answer)} the upgrade`]
    };
  }
  if (request.kind === CELL_EDIT) {
    const where = request.detail.where || `cell ${request.detail.cell_id ?? ''}`.trim();
    return {
      head: `The agent proposes a change to ${where} (${request.id}); accept or reject it on the cell. Its explanation:`,
      group: `proposed cell edit ${request.id}`,
      label: answer => [capital(answer), `${capital(answer)} edit ${request.id}`]
    };
  }
  const about = Object.values(request.detail).join(' ');
  const whole = request.conversation === '' ? ' (for the whole kernel)' : '';
  return {
    head: `Waiting for your answer: ${words(request.kind)}${whole}. Reason given:`,
    group: `${words(request.kind)} request ${about}`.trim(),
    label: answer => [capital(answer), `${capital(answer)} ${words(request.kind)} ${about}`.trim()]
  };
}

/** The list, redrawn only when what the kernel sent changed (a focused button stays put). */
export class PendingList {
  readonly node = el('div', 'jp-PhoenixPanel-pending');
  private drawn = '';

  constructor(private readonly actions: IPendingActions) {
    this.node.setAttribute('role', 'list');
    this.node.setAttribute('aria-label', 'waiting for your answer');
    this.node.tabIndex = -1;
  }

  draw(items: IPendingRequest[]): void {
    const key = JSON.stringify(items);
    this.node.hidden = items.length === 0;
    if (key === this.drawn) {
      return;
    }
    this.drawn = key;
    const hadFocus = this.node.contains(document.activeElement);
    this.node.replaceChildren(...items.map(request => this.item(request)));
    if (hadFocus) {
      // The answered request's button went with it: keep the keyboard in the list.
      (this.node.querySelector<HTMLButtonElement>('button') ?? this.node).focus();
    }
  }

  private item(request: IPendingRequest): HTMLElement {
    const { head, group, label } = describe(request);
    const item = el('div', 'jp-PhoenixPanel-request');
    item.setAttribute('role', 'listitem');
    item.dataset.phoenixPending = request.id;
    item.dataset.phoenixPendingKind = request.kind;
    const box = el('div', 'jp-PhoenixPanel-requestBox');
    box.setAttribute('role', 'group');
    box.setAttribute('aria-label', group);
    box.appendChild(el('p', 'jp-PhoenixPanel-asks', head));
    if (request.kind !== MODE_APPROVAL && request.kind !== CELL_EDIT) {
      Object.entries(request.detail).forEach(([key, value]) => {
        box.appendChild(el('div', 'jp-PhoenixPanel-detail', `${key}: ${value}`));
      });
    }
    const reason = el('blockquote', 'jp-PhoenixPanel-reason', request.reason);
    reason.dataset.phoenixPendingReason = '';
    box.appendChild(reason);
    const buttons = el('div', 'jp-PhoenixPanel-buttons jp-Phoenix-controls');
    request.answers.forEach(answer => {
      const [text, aria] = label(answer);
      buttons.appendChild(this.button(text, aria, () => this.actions.answer(request, answer)));
    });
    const cellId = request.detail.cell_id;
    if (request.answers.length === 0 && cellId) {
      buttons.appendChild(
        this.button('Show', `Show the cell of ${words(request.kind)} ${request.id}`, () =>
          this.actions.show(request, cellId)
        )
      );
    }
    box.appendChild(buttons);
    item.appendChild(box);
    return item;
  }

  private button(label: string, aria: string, onClick: () => void): HTMLButtonElement {
    const b = el('button', 'jp-Button jp-mod-styled jp-PhoenixPanel-button', label);
    b.type = 'button';
    b.setAttribute('aria-label', aria);
    b.addEventListener('click', onClick);
    return b;
  }
}
