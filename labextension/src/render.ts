/**
 * Drawing a conversation record as DOM.
 *
 * Every payload string reaches the page through `textContent`, except AI text,
 * which goes through the caller's Markdown renderer (JupyterLab's, sanitizing).
 * Elements carry stable `jp-Phoenix-*` classes and `data-phoenix-*` attributes:
 * styles hang on the classes and browser tests on the attributes, so neither
 * depends on the other.
 */

import { arr, Loose, num, obj, objOrNull, str } from './record';
import { diffLineKind } from './diff';

/** Renders Markdown into `host`; must sanitize, since the text comes from the model. */
export type MarkdownRenderer = (host: HTMLElement, source: string) => Promise<void>;

/** Labels of the tool groups of seed 002, as a reader would name them. */
const GROUP_LABELS: { readonly [group: string]: string } = {
  read: 'Read',
  write: 'Write',
  bash: 'Bash',
  other: 'Other'
};

/** Collects Markdown renders so the whole record can be awaited once. */
class Drawing {
  readonly pending: Promise<void>[] = [];

  constructor(private readonly markdown: MarkdownRenderer) {}

  /** A Markdown block; rendering is asynchronous and awaited by `renderRecord`. */
  markdownBlock(className: string, source: string): HTMLElement {
    const host = el('div', `${className} jp-Phoenix-markdown`);
    this.pending.push(
      this.markdown(host, source).catch(() => {
        // A renderer failure must not lose the text: show it plainly.
        host.textContent = source;
      })
    );
    return host;
  }
}

/** An element with a class and optional text, set through textContent only. */
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

/** A preformatted block, for command output, inputs and results. */
function pre(className: string, text: string): HTMLPreElement {
  return el('pre', `jp-Phoenix-pre ${className}`, text);
}

function formatTokens(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** Draws `record` into `host`, replacing what was there; resolves when Markdown is in. */
export async function renderRecord(
  host: HTMLElement,
  record: Loose,
  markdown: MarkdownRenderer
): Promise<void> {
  const drawing = new Drawing(markdown);
  const root = el('div', 'jp-Phoenix-record');
  const conversation = obj(record.conversation);
  const state = obj(conversation.state);
  root.dataset.phoenixRecord = str(conversation.id);
  root.dataset.phoenixMode = str(conversation.mode);
  root.dataset.phoenixState = str(state.name);
  root.dataset.phoenixBusy = String(state.busy === true);

  root.appendChild(header(conversation, state));
  const context = objOrNull(record.context);
  if (context !== null) {
    root.appendChild(meter(context));
  }
  const summary = str(record.summary);
  if (summary) {
    const section = el('section', 'jp-Phoenix-summary');
    section.dataset.phoenixSummary = 'record';
    section.appendChild(el('div', 'jp-Phoenix-summaryTitle', 'Continuation summary'));
    section.appendChild(drawing.markdownBlock('jp-Phoenix-summaryText', summary));
    root.appendChild(section);
  }
  for (const cycle of arr(record.cycles)) {
    root.appendChild(cycleNode(drawing, obj(cycle)));
  }
  const retry = objOrNull(record.retry);
  if (retry !== null) {
    root.appendChild(retryBanner(retry));
  }
  const approval = objOrNull(record.pending_approval);
  if (approval !== null) {
    const banner = el('div', 'jp-Phoenix-banner jp-Phoenix-pendingApproval');
    banner.dataset.phoenixPendingApproval = str(approval.tool_use_id);
    banner.textContent = `Waiting for approval of write access: ${str(approval.reason)}`;
    root.appendChild(banner);
  }
  await Promise.all(drawing.pending);
  keepOpenGroups(host, root);
  host.replaceChildren(root);
}

/**
 * Re-opens the tool groups the reader had opened before this redraw.
 *
 * The kernel updates the record in place while the agent works; without this
 * every streamed update would snap an expanded group shut under the reader.
 */
function keepOpenGroups(previous: HTMLElement, next: HTMLElement): void {
  const open = new Set<string>();
  previous.querySelectorAll<HTMLDetailsElement>('details[data-phoenix-group-key]').forEach(node => {
    if (node.open) {
      open.add(node.dataset.phoenixGroupKey ?? '');
    }
  });
  if (open.size === 0) {
    return;
  }
  next.querySelectorAll<HTMLDetailsElement>('details[data-phoenix-group-key]').forEach(node => {
    if (open.has(node.dataset.phoenixGroupKey ?? '')) {
      node.open = true;
    }
  });
}

function header(conversation: Loose, state: Loose): HTMLElement {
  const node = el('div', 'jp-Phoenix-header');
  node.appendChild(el('span', 'jp-Phoenix-title', str(conversation.slug) || 'phoenix'));
  const mode = str(conversation.mode);
  if (mode) {
    const badge = el(
      'span',
      `jp-Phoenix-badge jp-Phoenix-mode-${mode}`,
      mode === 'unrestricted' ? 'Unrestricted' : 'Restricted (read-only)'
    );
    badge.dataset.phoenixModeBadge = mode;
    node.appendChild(badge);
  }
  const stateName = str(state.name);
  if (stateName) {
    const label = el('span', 'jp-Phoenix-badge jp-Phoenix-state', stateName.replace(/_/g, ' '));
    label.dataset.phoenixStateBadge = stateName;
    const message = str(state.message);
    if (message) {
      label.title = message;
    }
    node.appendChild(label);
  }
  const facts = [str(conversation.model), str(conversation.cwd)].filter(Boolean).join(' · ');
  if (facts) {
    node.appendChild(el('span', 'jp-Phoenix-facts', facts));
  }
  return node;
}

/** The context meter (REQ-BED-023: warning style from 80 % of the window). */
function meter(context: Loose): HTMLElement {
  const used = num(context.used) ?? 0;
  const size = num(context.window) ?? 0;
  const fraction = num(context.fraction) ?? (size > 0 ? used / size : 0);
  const warning = context.warning === true || fraction >= 0.8;
  const limit = context.limit_reached === true;
  const node = el('div', 'jp-Phoenix-meter');
  node.dataset.phoenixMeter = String(fraction);
  node.dataset.phoenixWarning = String(warning);
  node.dataset.phoenixLimitReached = String(limit);
  if (warning) {
    node.classList.add('jp-Phoenix-meter-warning');
  }
  const bar = el('div', 'jp-Phoenix-meterBar');
  bar.setAttribute('role', 'meter');
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', String(size));
  bar.setAttribute('aria-valuenow', String(used));
  bar.setAttribute('aria-label', 'Context used');
  const fill = el('div', 'jp-Phoenix-meterFill');
  fill.style.width = `${Math.min(100, Math.max(0, fraction * 100)).toFixed(1)}%`;
  bar.appendChild(fill);
  node.appendChild(bar);
  let text = `${formatTokens(used)} / ${formatTokens(size)} tokens (${Math.round(fraction * 100)}%)`;
  if (limit) {
    text += ' — context limit reached';
  } else if (warning) {
    text += ' — context nearly full';
  }
  node.appendChild(el('span', 'jp-Phoenix-meterText', text));
  return node;
}

function retryBanner(retry: Loose): HTMLElement {
  const node = el('div', 'jp-Phoenix-banner jp-Phoenix-retrying');
  node.dataset.phoenixRetrying = str(retry.attempt);
  node.textContent = `Retrying: ${retryText(retry)}${str(retry.message) ? ` — ${str(retry.message)}` : ''}`;
  return node;
}

function retryText(retry: Loose): string {
  const attempt = str(retry.attempt);
  const max = str(retry.max);
  const delay = num(retry.delay);
  let text = `attempt ${attempt}${max ? ` of ${max}` : ''}`;
  if (delay !== null) {
    text += ` in ${delay} s`;
  }
  return text;
}

function cycleNode(drawing: Drawing, cycle: Loose): HTMLElement {
  const node = el('div', 'jp-Phoenix-cycle');
  node.dataset.phoenixCycle = str(cycle.index);
  for (const step of arr(cycle.steps)) {
    node.appendChild(stepNode(drawing, obj(step)));
  }
  const stop = objOrNull(cycle.stop);
  const reason = stop === null ? 'running' : str(stop.reason);
  node.dataset.phoenixStop = reason;
  if (stop !== null && reason !== 'completed') {
    node.appendChild(el('div', `jp-Phoenix-stop jp-Phoenix-stop-${reason}`, `Run ended: ${reason}`));
  }
  return node;
}

function stepNode(drawing: Drawing, step: Loose): HTMLElement {
  const kind = str(step.kind);
  const node = el('div', `jp-Phoenix-step jp-Phoenix-step-${kind || 'unknown'}`);
  node.dataset.phoenixStep = kind || 'unknown';
  switch (kind) {
    case 'user':
      userStep(node, step);
      break;
    case 'ai':
      aiStep(drawing, node, step);
      break;
    case 'system':
      node.appendChild(el('span', 'jp-Phoenix-label', 'System'));
      node.appendChild(el('span', 'jp-Phoenix-text', str(step.text)));
      break;
    case 'approval':
      approvalStep(node, step);
      break;
    case 'sub_agents':
      subAgentsStep(node, step);
      break;
    case 'error':
      errorStep(node, step);
      break;
    case 'continuation':
      node.appendChild(el('div', 'jp-Phoenix-summaryTitle', 'Conversation continued from summary'));
      node.appendChild(drawing.markdownBlock('jp-Phoenix-summaryText', str(step.summary)));
      break;
    default:
      // A newer producer may add kinds: show the raw step rather than drop it.
      node.appendChild(el('span', 'jp-Phoenix-label', kind || 'step'));
      node.appendChild(pre('jp-Phoenix-raw', JSON.stringify(step, null, 2)));
  }
  return node;
}

function userStep(node: HTMLElement, step: Loose): void {
  const userKind = str(step.user_kind) || 'direct';
  node.dataset.phoenixUserKind = userKind;
  const label = userKind === 'steer' ? 'You (steer)' : userKind === 'followUp' ? 'You (follow-up)' : 'You';
  node.appendChild(el('span', 'jp-Phoenix-label', label));
  node.appendChild(el('div', 'jp-Phoenix-userText', str(step.text)));
  const images = arr(step.images);
  if (images.length > 0) {
    const list = el('div', 'jp-Phoenix-images');
    for (const image of images) {
      const item = obj(image);
      const chip = el('span', 'jp-Phoenix-chip', `image: ${str(item.name) || str(item.media_type)}`);
      chip.dataset.phoenixImage = str(item.media_type);
      list.appendChild(chip);
    }
    node.appendChild(list);
  }
}

function aiStep(drawing: Drawing, node: HTMLElement, step: Loose): void {
  const item = objOrNull(step.item);
  if (item !== null) {
    const type = str(item.type) === 'reasoning' ? 'reasoning' : 'assistant';
    const block = drawing.markdownBlock(`jp-Phoenix-ai jp-Phoenix-ai-${type}`, str(item.text));
    block.dataset.phoenixAi = type;
    if (type === 'reasoning') {
      const wrap = el('div', 'jp-Phoenix-reasoning');
      wrap.appendChild(el('span', 'jp-Phoenix-label', 'Reasoning'));
      wrap.appendChild(block);
      node.appendChild(wrap);
    } else {
      node.appendChild(block);
    }
  }
  for (const group of arr(step.tool_groups)) {
    node.appendChild(toolGroup(obj(group)));
  }
}

/** Tool calls are not settled until they have a result; errors win over success. */
function callStatus(call: Loose): 'running' | 'error' | 'ok' {
  const result = objOrNull(call.result);
  if (result === null) {
    return 'running';
  }
  return result.is_error === true ? 'error' : 'ok';
}

/** One tool group, collapsed to a single line until the reader opens it. */
function toolGroup(group: Loose): HTMLElement {
  const name = str(group.group) || 'other';
  const calls = arr(group.calls).map(obj);
  const details = el('details', `jp-Phoenix-toolGroup jp-Phoenix-group-${name}`);
  details.dataset.phoenixGroup = name;
  // A group's identity across redraws: its first call's id, which the producer keeps stable.
  details.dataset.phoenixGroupKey = `${name}:${str(calls[0]?.id)}`;
  const statuses = calls.map(callStatus);
  const status = statuses.includes('running')
    ? 'running'
    : statuses.includes('error')
      ? 'error'
      : 'ok';
  details.dataset.phoenixStatus = status;
  const summary = el('summary', 'jp-Phoenix-groupSummary');
  summary.appendChild(el('span', 'jp-Phoenix-groupLabel', GROUP_LABELS[name] ?? name));
  summary.appendChild(
    el('span', 'jp-Phoenix-groupCount', calls.length === 1 ? '1 call' : `${calls.length} calls`)
  );
  const lines = calls.map(call => str(call.summary) || str(call.name)).join(' · ');
  summary.appendChild(el('span', 'jp-Phoenix-groupLine', lines));
  if (status !== 'ok') {
    summary.appendChild(
      el('span', `jp-Phoenix-status jp-Phoenix-status-${status}`, status === 'running' ? 'running…' : 'error')
    );
  }
  details.appendChild(summary);
  for (const call of calls) {
    details.appendChild(toolCall(call));
  }
  return details;
}

function toolCall(call: Loose): HTMLElement {
  const node = el('div', 'jp-Phoenix-call');
  const name = str(call.name);
  node.dataset.phoenixCall = str(call.id);
  node.dataset.phoenixTool = name;
  node.dataset.phoenixStatus = callStatus(call);
  const result = objOrNull(call.result);
  const display = obj(result?.display);
  const input = obj(call.input);
  if (name === 'bash' || typeof display.command === 'string') {
    bashCall(node, input, result, display);
  } else if (typeof display.diff === 'string') {
    patchCall(node, input, result, display);
  } else {
    genericCall(node, call, input, result);
  }
  return node;
}

function bashCall(node: HTMLElement, input: Loose, result: Loose | null, display: Loose): void {
  const command = str(display.command) || str(input.command);
  const line = el('div', 'jp-Phoenix-callHead');
  const cmd = el('code', 'jp-Phoenix-command', `$ ${command}`);
  cmd.dataset.phoenixBashCommand = command;
  line.appendChild(cmd);
  const exit = num(display.exit_code);
  let exitText: string;
  let exitState: string;
  if (result === null) {
    exitText = 'running…';
    exitState = 'running';
  } else if (display.timed_out === true) {
    exitText = 'timed out';
    exitState = 'timeout';
  } else if (exit !== null) {
    exitText = `exit ${exit}`;
    exitState = exit === 0 ? 'ok' : 'error';
  } else {
    exitText = result.is_error === true ? 'failed' : 'done';
    exitState = result.is_error === true ? 'error' : 'ok';
  }
  const badge = el('span', `jp-Phoenix-exit jp-Phoenix-exit-${exitState}`, exitText);
  badge.dataset.phoenixExit = exit === null ? exitState : String(exit);
  line.appendChild(badge);
  node.appendChild(line);
  if (result !== null) {
    const output = pre('jp-Phoenix-output', str(result.content));
    output.dataset.phoenixOutput = 'bash';
    node.appendChild(output);
    if (display.output_truncated === true) {
      node.appendChild(el('div', 'jp-Phoenix-note', 'Output truncated.'));
    }
  }
}

function patchCall(node: HTMLElement, input: Loose, result: Loose | null, display: Loose): void {
  const head = el('div', 'jp-Phoenix-callHead');
  const path = str(display.path) || str(input.path);
  const pathNode = el('code', 'jp-Phoenix-path', path);
  pathNode.dataset.phoenixPath = path;
  head.appendChild(pathNode);
  node.appendChild(head);
  const diff = el('pre', 'jp-Phoenix-pre jp-Phoenix-diff');
  diff.dataset.phoenixDiff = path;
  const text = str(display.diff).replace(/\n$/, '');
  for (const line of text.split('\n')) {
    const kind = diffLineKind(line);
    const span = el('span', `jp-Phoenix-diffLine jp-Phoenix-diff-${kind}`, line);
    span.dataset.phoenixDiffLine = kind;
    diff.appendChild(span);
  }
  node.appendChild(diff);
  if (result !== null && result.is_error === true) {
    node.appendChild(pre('jp-Phoenix-output jp-Phoenix-output-error', str(result.content)));
  }
}

function genericCall(node: HTMLElement, call: Loose, input: Loose, result: Loose | null): void {
  const head = el('div', 'jp-Phoenix-callHead');
  head.appendChild(el('code', 'jp-Phoenix-toolName', str(call.name)));
  node.appendChild(head);
  if (Object.keys(input).length > 0) {
    node.appendChild(pre('jp-Phoenix-input', JSON.stringify(input, null, 2)));
  }
  if (result === null) {
    node.appendChild(el('div', 'jp-Phoenix-note', 'running…'));
  } else {
    const output = pre(
      result.is_error === true ? 'jp-Phoenix-output jp-Phoenix-output-error' : 'jp-Phoenix-output',
      str(result.content)
    );
    output.dataset.phoenixOutput = str(call.name);
    node.appendChild(output);
  }
}

function approvalStep(node: HTMLElement, step: Loose): void {
  const decision = str(step.decision) || 'pending';
  node.dataset.phoenixDecision = decision;
  node.appendChild(el('span', 'jp-Phoenix-label', 'Write access requested'));
  node.appendChild(el('span', 'jp-Phoenix-text', str(step.reason)));
  node.appendChild(
    el('span', `jp-Phoenix-badge jp-Phoenix-decision-${decision}`, decision)
  );
}

function subAgentsStep(node: HTMLElement, step: Loose): void {
  const agents = arr(step.agents).map(obj);
  node.appendChild(
    el('span', 'jp-Phoenix-label', agents.length === 1 ? '1 sub-agent' : `${agents.length} sub-agents`)
  );
  const list = el('ul', 'jp-Phoenix-agents');
  for (const agent of agents) {
    const outcome = str(agent.outcome) || 'pending';
    const item = el('li', `jp-Phoenix-agent jp-Phoenix-outcome-${outcome}`);
    item.dataset.phoenixAgent = str(agent.conversation_id);
    item.dataset.phoenixOutcome = outcome;
    item.appendChild(el('span', `jp-Phoenix-badge jp-Phoenix-outcome-badge-${outcome}`, outcome));
    item.appendChild(el('span', 'jp-Phoenix-agentTask', str(agent.task)));
    const result = str(agent.result);
    if (result) {
      item.appendChild(el('div', 'jp-Phoenix-agentResult', result));
    }
    list.appendChild(item);
  }
  node.appendChild(list);
}

function errorStep(node: HTMLElement, step: Loose): void {
  const kind = str(step.error_kind) || 'unknown';
  node.dataset.phoenixErrorKind = kind;
  node.appendChild(el('span', 'jp-Phoenix-label', `Error (${kind.replace(/_/g, ' ')})`));
  node.appendChild(el('span', 'jp-Phoenix-text', str(step.text)));
  const retry = objOrNull(step.retry);
  if (retry !== null) {
    const info = el('div', 'jp-Phoenix-retry', `Retry ${retryText(retry)}`);
    info.dataset.phoenixRetry = str(retry.attempt);
    node.appendChild(info);
  }
}
