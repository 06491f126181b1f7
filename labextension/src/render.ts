/**
 * Drawing a conversation record as DOM.
 *
 * Every payload string reaches the page through `textContent`, except the
 * model's Markdown (AI text, reasoning, summaries), which is drawn by
 * `inertMarkdown` from a parser's tokens: no raw HTML, no image, no style, every
 * link showing its target (README "Security model"). The approval request's
 * reason is the model's too: it is a labelled, bounded quotation in plain text,
 * under phoenix's own line saying what approving does. Elements carry stable
 * `jp-Phoenix-*` classes and `data-phoenix-*` attributes: styles hang on the
 * classes and browser tests on the attributes, so neither depends on the other.
 */

import { arr, inert, Loose, num, obj, objOrNull, shownCwd, str } from './record';
import { diffLineKind } from './diff';
import { linkTarget, renderInertMarkdown } from './inertMarkdown';
import { cellEditCall } from './editcall';

/**
 * Words for states and tool groups. The kernel puts its own words in the record
 * (`state.label`, `group.label`, computed by the same code as the HTML, Markdown
 * and text fallbacks); these are only for records written without them.
 */
const STATE_WORDS: { readonly [state: string]: string } = {
  idle: 'idle',
  awaiting_llm: 'thinking',
  llm_requesting: 'thinking',
  tool_executing: 'running a tool',
  cancelling: 'stopping',
  awaiting_sub_agents: 'waiting for sub-agents',
  awaiting_mode_approval: 'waiting for your approval',
  awaiting_continuation: 'summarising the conversation',
  context_exhausted: 'context full — run `%phoenix continue`',
  error: 'stopped by an error',
  completed: 'finished',
  failed: 'failed'
};
const PAUSED_WORDS = 'paused — run `%phoenix approve` or `%phoenix deny`';
const APPROVAL_TITLE = 'The agent asks for write access (Unrestricted mode)';
const APPROVE_HOWTO =
  'Answer with the Approve / Deny buttons, or in a headless run with `%phoenix approve` or `%phoenix deny`.';
/** Said by phoenix, not the model: what the Approve button does (notebook/_render/view.py). */
const APPROVE_MEANS =
  'Approving switches this conversation to Unrestricted mode: the agent may then change ' +
  'files in its folder and run commands without the sandbox. Deny keeps it read-only.';
const REASON_LABEL = "The agent's reason, in its own words:";
const REASON_MAX_CHARS = 600;
const REASON_MAX_LINES = 12;
/** The results core/transition.py gives calls the user cancelled (or skipped by cancelling). */
const CANCELLED_RESULTS = new Set([
  'Cancelled by the user while this tool was running.',
  'Skipped: the user cancelled before this tool ran.'
]);

/** Calls the approval step already tells (so they get no row of their own). */
const HIDDEN_TOOLS = new Set(['request_mode_upgrade']);

/** A bounded base64 PNG data URI: the only image source a record may carry. */
const THUMBNAIL = /^data:image\/png;base64,[A-Za-z0-9+/]{1,200000}={0,2}$/;

function stateWords(state: Loose): string {
  const label = str(state.label);
  if (label) {
    return label;
  }
  const name = str(state.name);
  if (name === 'awaiting_mode_approval' && state.paused === true) {
    return PAUSED_WORDS;
  }
  return STATE_WORDS[name] ?? name.replace(/_/g, ' ');
}

/** Text with `code` spans as <code>, through textContent only. */
function inlineCode(className: string, text: string): HTMLElement {
  const node = el('span', className);
  text.split('`').forEach((part, i) => {
    if (part) {
      node.appendChild(i % 2 === 1 ? el('code', '', part) : document.createTextNode(part));
    }
  });
  return node;
}

/** Draws the model's Markdown blocks (see `inertMarkdown`). */
class Drawing {
  /** A Markdown block of model content, inert. */
  markdownBlock(className: string, source: string): HTMLElement {
    const host = el('div', `${className} jp-Phoenix-markdown`);
    try {
      renderInertMarkdown(host, source);
    } catch {
      // A parser failure must not lose the text: show it plainly.
      host.textContent = source;
    }
    return host;
  }
}

/**
 * One class naming a record value's variant (`jp-Phoenix-mode-restricted`). The value
 * comes from the record, which anyone may have edited: only letters, digits and `_`
 * survive, so it can neither add a second class (a space) nor borrow one of phoenix's.
 */
function variant(prefix: string, value: string): string {
  return `${prefix}-${value.replace(/[^A-Za-z0-9_]/g, '_')}`;
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

/** Draws `record` into `host`, replacing what was there. */
export async function renderRecord(host: HTMLElement, record: Loose): Promise<void> {
  const drawing = new Drawing();
  const root = el('div', 'jp-Phoenix-record');
  const conversation = obj(record.conversation);
  const state = obj(conversation.state);
  root.dataset.phoenixRecord = str(conversation.id);
  root.dataset.phoenixMode = str(conversation.mode);
  root.dataset.phoenixState = str(state.name);
  root.dataset.phoenixBusy = String(state.busy === true);

  // Notes ("continuing SLUG", "nothing new since …") say what the record below is:
  // they come first, before the header.
  for (const note of arr(record.notes)) {
    if (str(note)) {
      root.appendChild(inlineCode('jp-Phoenix-note jp-Phoenix-recordNote', str(note)));
    }
  }
  root.appendChild(header(conversation, state));
  const context = objOrNull(record.context);
  if (context !== null) {
    root.appendChild(meter(context));
  }
  const spent = spendingLine(objOrNull(record.usage));
  if (spent) {
    const cost = el('div', 'jp-Phoenix-cost', spent);
    cost.dataset.phoenixCost = '';
    root.appendChild(cost);
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
    root.appendChild(cycleNode(drawing, obj(cycle), state));
  }
  const retry = objOrNull(record.retry);
  if (retry !== null) {
    root.appendChild(retryBanner(retry));
  }
  const approval = objOrNull(record.pending_approval);
  const cycles = arr(record.cycles).map(obj);
  const stepShowsIt = cycles.some(c =>
    arr(c.steps).some(s => str(obj(s).kind) === 'approval' && str(obj(s).decision) === 'pending')
  );
  if (approval !== null && !stepShowsIt) {
    // Only an old record lacks the pending step: show the request once, here.
    const node = el('div', 'jp-Phoenix-step jp-Phoenix-step-approval');
    node.dataset.phoenixStep = 'approval';
    approvalStep(node, { reason: approval.reason, decision: 'pending' }, state);
    root.appendChild(node);
  }
  keepOpenGroups(host, root);
  host.replaceChildren(root);
}

/**
 * Keeps each tool group as the reader left it (opened or closed) across redraws.
 *
 * The kernel updates the record in place while the agent works; without this
 * every streamed update would snap an expanded group shut (or a closed diff
 * open again) under the reader.
 */
function keepOpenGroups(previous: HTMLElement, next: HTMLElement): void {
  const state = new Map<string, boolean>();
  previous.querySelectorAll<HTMLDetailsElement>('details[data-phoenix-group-key]').forEach(node => {
    state.set(node.dataset.phoenixGroupKey ?? '', node.open);
  });
  if (state.size === 0) {
    return;
  }
  next.querySelectorAll<HTMLDetailsElement>('details[data-phoenix-group-key]').forEach(node => {
    const open = state.get(node.dataset.phoenixGroupKey ?? '');
    if (open !== undefined) {
      node.open = open;
    }
  });
}

/** 'via bedrock · without caching, thinking' (as view.serving says it), or ''. */
function serving(conversation: Loose): string {
  const parts: string[] = [];
  const provider = str(conversation.provider);
  if (provider && provider !== 'anthropic') {
    parts.push(`via ${provider}`);
  }
  const lacks = arr(conversation.lacks).map(str).filter(Boolean);
  if (lacks.length > 0) {
    parts.push(`without ${lacks.join(', ')}`);
  }
  return parts.join(' · ');
}

function header(conversation: Loose, state: Loose): HTMLElement {
  const node = el('div', 'jp-Phoenix-header');
  node.appendChild(el('span', 'jp-Phoenix-title', str(conversation.slug) || 'phoenix'));
  const mode = str(conversation.mode);
  if (mode) {
    const badge = el(
      'span',
      `jp-Phoenix-badge ${variant('jp-Phoenix-mode', mode)}`,
      mode === 'unrestricted' ? 'Unrestricted' : 'Restricted (read-only)'
    );
    badge.dataset.phoenixModeBadge = mode;
    node.appendChild(badge);
  }
  const stateName = str(state.name);
  if (stateName) {
    const label = inlineCode('jp-Phoenix-badge jp-Phoenix-state', stateWords(state));
    label.dataset.phoenixStateBadge = stateName;
    const message = str(state.message);
    if (message) {
      label.title = message;
    }
    node.appendChild(label);
  }
  const facts = [str(conversation.model), shownCwd(str(conversation.cwd)), serving(conversation)]
    .filter(Boolean)
    .join(' · ');
  if (facts) {
    node.appendChild(el('span', 'jp-Phoenix-facts', facts));
  }
  return node;
}

function usd(value: number): string {
  return value > 0 && value < 0.01 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

function shortTokens(n: number): string {
  if (n >= 1_000_000) {
    return `${(n / 1_000_000).toFixed(1)}M`;
  }
  return n >= 1_000 ? `${(n / 1_000).toFixed(1)}k` : `${Math.round(n)}`;
}

/** One part of the cost line: dollars when the model is priced, else tokens only. */
function spendPart(part: Loose, priced: boolean): string {
  const cost = num(part.cost_usd);
  if (priced && cost !== null) {
    return usd(cost);
  }
  const prompt =
    (num(part.input_tokens) ?? 0) +
    (num(part.cache_write_tokens) ?? 0) +
    (num(part.cache_read_tokens) ?? 0);
  return `${shortTokens(prompt)} in / ${shortTokens(num(part.output_tokens) ?? 0)} out tokens`;
}

/** The record's `usage` as the Python renderers word it (notebook/_render/cost.py). */
function spendingLine(usage: Loose | null): string {
  if (usage === null) {
    return '';
  }
  const priced = usage.priced === true;
  const turn = obj(usage.turn);
  const total = obj(usage.total);
  if (!num(total.responses)) {
    return '';
  }
  const parts: string[] = [];
  if (num(turn.responses)) {
    parts.push(`this turn ${spendPart(turn, priced)}`);
  }
  parts.push(`conversation ${spendPart(total, priced)}`);
  const share = num(total.cache_hit_share);
  if (share !== null) {
    parts.push(`${Math.round(share * 100)}% cache hits`);
  }
  if (!priced) {
    parts.push('price unknown');
  }
  return parts.join(' · ');
}

/** Citations as numbered footnote links; only http(s) targets become links. */
function citationList(item: Loose): HTMLElement | null {
  const cites = arr(item.citations).map(obj);
  if (cites.length === 0) {
    return null;
  }
  const list = el('ol', 'jp-Phoenix-citations');
  list.dataset.phoenixCitations = '';
  cites.forEach((cite, i) => {
    const entry = el('li', '');
    entry.value = i + 1;
    const url = str(cite.url);
    const title = str(cite.title) || url || str(cite.cited_text).slice(0, 60) || `source ${i + 1}`;
    if (/^https?:\/\//i.test(url) && linkTarget(url)) {
      const link = el('a', 'jp-Phoenix-contentLink', title);
      link.href = url;
      link.target = '_blank';
      link.rel = 'nofollow noopener noreferrer';
      entry.appendChild(link);
      if (title !== url) {
        entry.appendChild(el('span', 'jp-Phoenix-href', ` (${url})`));
      }
    } else {
      entry.textContent = title;
    }
    list.appendChild(entry);
  });
  return list;
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

function cycleNode(drawing: Drawing, cycle: Loose, state: Loose): HTMLElement {
  const node = el('div', 'jp-Phoenix-cycle');
  node.dataset.phoenixCycle = str(cycle.index);
  if (cycle.folded === true) {
    // Shown in full by an earlier output of the notebook: one line here.
    node.classList.add('jp-Phoenix-folded');
    node.dataset.phoenixFolded = 'true';
    node.textContent = str(cycle.line) || `Request ${(num(cycle.index) ?? 0) + 1} (shown above)`;
    return node;
  }
  if (cycle.continued === true) {
    node.dataset.phoenixContinued = 'true';
    const n = (num(cycle.index) ?? 0) + 1;
    node.appendChild(el('div', 'jp-Phoenix-cycleHead', `Request ${n} (continued)`));
  }
  for (const step of arr(cycle.steps)) {
    node.appendChild(stepNode(drawing, obj(step), state));
  }
  const stop = objOrNull(cycle.stop);
  const reason = stop === null ? 'running' : str(stop.reason);
  node.dataset.phoenixStop = reason;
  if (stop !== null && reason !== 'completed') {
    node.appendChild(el('div', `jp-Phoenix-stop ${variant('jp-Phoenix-stop', reason)}`, `Run ended: ${reason}`));
  }
  return node;
}

function stepNode(drawing: Drawing, step: Loose, state: Loose): HTMLElement {
  const kind = str(step.kind);
  const node = el('div', `jp-Phoenix-step ${variant('jp-Phoenix-step', kind || 'unknown')}`);
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
      approvalStep(node, step, state);
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
      node.appendChild(pre('jp-Phoenix-raw', inert(JSON.stringify(step, null, 2))));
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
      const thumb = str(item.thumbnail);
      if (THUMBNAIL.test(thumb)) {
        const img = el('img', 'jp-Phoenix-thumb');
        img.src = thumb;
        img.alt = str(item.name) || 'image';
        list.appendChild(img);
      }
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
      const notes = citationList(item);
      if (notes !== null) {
        node.appendChild(notes);
      }
    }
  }
  for (const group of arr(step.tool_groups)) {
    const calls = arr(obj(group).calls).map(obj).filter(c => !HIDDEN_TOOLS.has(str(c.name)));
    if (calls.length > 0) {
      node.appendChild(toolGroup(obj(group), calls));
    }
  }
}

/** Tool calls are not settled until they have a result; errors win over success; a call
 * the user cancelled is neither. */
function callStatus(call: Loose): 'running' | 'error' | 'cancelled' | 'ok' {
  const result = objOrNull(call.result);
  if (result === null) {
    return 'running';
  }
  if (result.is_error === true && CANCELLED_RESULTS.has(str(result.content))) {
    return 'cancelled';
  }
  return result.is_error === true ? 'error' : 'ok';
}

/** What a group did, for records written without the kernel's `label`. */
function groupWords(calls: Loose[]): string {
  const byName = new Map<string, Loose[]>();
  for (const call of calls) {
    const name = str(call.name);
    byName.set(name, [...(byName.get(name) ?? []), call]);
  }
  const phrases: string[] = [];
  byName.forEach((group, name) => {
    const n = group.length;
    if (name === 'bash') {
      phrases.push(n === 1 ? `ran \`${str(obj(group[0].input).command)}\`` : `ran ${n} commands`);
    } else if (name === 'patch') {
      const paths = new Set(group.map(c => str(obj(c.input).path)));
      phrases.push(`edited ${paths.size === 1 ? [...paths][0] : `${paths.size} files`}`);
    } else if (name === 'keyword_search') {
      const terms = group.flatMap(c => arr(obj(c.input).search_terms).map(str));
      phrases.push(terms.length ? `searched for ${terms.map(t => `'${t}'`).join(', ')}` : 'searched');
    } else if (name === 'think') {
      phrases.push('thought it over');
    } else {
      phrases.push(`used ${name || 'a tool'}${n > 1 ? ` ${n} times` : ''}`);
    }
  });
  return phrases.join(', ');
}

/** One tool group: one line saying what it did; write groups (diffs) open from the start. */
function toolGroup(group: Loose, calls: Loose[]): HTMLElement {
  const name = str(group.group) || 'other';
  const details = el('details', `jp-Phoenix-toolGroup ${variant('jp-Phoenix-group', name)}`);
  details.open = group.open === true || (group.open === undefined && name === 'write');
  details.dataset.phoenixGroup = name;
  // A group's identity across redraws: its first call's id, which the producer keeps stable.
  details.dataset.phoenixGroupKey = `${name}:${str(calls[0]?.id)}`;
  const statuses = calls.map(callStatus);
  const status = statuses.includes('running')
    ? 'running'
    : statuses.includes('error')
      ? 'error'
      : statuses.includes('cancelled')
        ? 'cancelled'
        : 'ok';
  details.dataset.phoenixStatus = status;
  const summary = el('summary', 'jp-Phoenix-groupSummary');
  const label = inlineCode('jp-Phoenix-groupLabel', str(group.label) || groupWords(calls));
  label.dataset.phoenixGroupLabel = label.textContent ?? '';
  summary.appendChild(label);
  const failed = statuses.filter(s => s === 'error').length;
  if (status === 'running') {
    summary.appendChild(el('span', 'jp-Phoenix-status jp-Phoenix-status-running', 'running…'));
  } else if (failed > 0) {
    summary.appendChild(el('span', 'jp-Phoenix-status jp-Phoenix-status-error', `${failed} failed`));
  } else if (status === 'cancelled') {
    // Not a failure, and not a count that reads like a test result.
    summary.appendChild(el('span', 'jp-Phoenix-status jp-Phoenix-status-cancelled', 'cancelled'));
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
  if (name === 'edit_cell' || name === 'insert_cell') {
    cellEditCall(node, input, result, display);
  } else if (name === 'bash' || typeof display.command === 'string') {
    bashCall(node, input, result, display);
  } else if (typeof display.diff === 'string') {
    patchCall(node, input, result, display);
  } else {
    genericCall(node, call, input, result);
  }
  const changes = changesNode(name, display);
  if (changes !== null) {
    node.appendChild(changes);
  }
  return node;
}

const CHANGE_KINDS: readonly string[] = ['added', 'modified', 'deleted', 'mode'];

/**
 * What an Unrestricted call changed (`display.changes`, docs/record-format.md): one
 * line ("bash changed 3 files"), each file with its kind, each diff folded under it.
 */
function changesNode(name: string, display: Loose): HTMLElement | null {
  const changes = objOrNull(display.changes);
  if (changes === null) {
    return null;
  }
  const files = arr(changes.files).map(obj);
  const omitted = num(changes.omitted) ?? 0;
  const count = files.length + omitted;
  const tool = name || 'tool';
  const error = str(changes.error);
  let summary = `${tool} changed ${count} file${count === 1 ? '' : 's'}`;
  if (error) {
    summary = `${tool}: changes not recorded (${error})`;
  } else if (count === 0) {
    summary = `${tool} changed no files`;
  }
  const details = el('details', 'jp-Phoenix-changes');
  details.dataset.phoenixChanges = String(count);
  details.appendChild(el('summary', 'jp-Phoenix-changesSummary', summary));
  const list = el('ul', 'jp-Phoenix-changesList');
  for (const file of files) {
    const kind = CHANGE_KINDS.includes(str(file.kind)) ? str(file.kind) : 'modified';
    const path = str(file.path);
    const oldMode = str(file.old_mode);
    const newMode = str(file.new_mode);
    let line = `${kind} ${path}`;
    if (oldMode && newMode && oldMode !== newMode) {
      line += ` (${oldMode} → ${newMode})`;
    }
    if (file.stored === false) {
      line += ' — not restorable (over the size limit: recorded by hash only)';
    }
    const item = el('li', 'jp-Phoenix-change');
    item.dataset.phoenixChange = kind;
    item.appendChild(el('code', 'jp-Phoenix-path', line));
    const diffText = str(file.diff).replace(/\n$/, '');
    if (diffText && name !== 'patch') {
      const diff = el('pre', 'jp-Phoenix-pre jp-Phoenix-diff');
      diff.dataset.phoenixChangeDiff = path;
      for (const diffLine of diffText.split('\n')) {
        const lineKind = diffLineKind(diffLine);
        const span = el('span', `jp-Phoenix-diffLine jp-Phoenix-diff-${lineKind}`, diffLine);
        span.dataset.phoenixDiffLine = lineKind;
        diff.appendChild(span);
      }
      item.appendChild(diff);
    }
    list.appendChild(item);
  }
  if (omitted > 0) {
    list.appendChild(el('li', 'jp-Phoenix-note', `… and ${omitted} more`));
  }
  details.appendChild(list);
  return details;
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
  // A kernel tool's display in words (`status`, set by the notebook's `decorate` from
  // the same `view.kernel_status` the fallbacks use).
  const status = str(call.status);
  if (status) {
    const words = el('span', 'jp-Phoenix-note jp-Phoenix-callStatus', status);
    words.dataset.phoenixCallStatus = status;
    head.appendChild(words);
  }
  node.appendChild(head);
  if (Object.keys(input).length > 0) {
    node.appendChild(pre('jp-Phoenix-input', inert(JSON.stringify(input, null, 2))));
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

/** One block while the request waits (reason as Markdown), one line once answered. */
function approvalStep(node: HTMLElement, step: Loose, state: Loose): void {
  const decision = str(step.decision) || 'pending';
  node.dataset.phoenixDecision = decision;
  const reason = str(step.reason).trim();
  if (decision !== 'pending') {
    node.classList.add('jp-Phoenix-approvalLine', variant('jp-Phoenix-decision', decision));
    const mark = decision === 'approved' ? '✓' : decision === 'denied' ? '✗' : '?';
    let first = (reason.split('\n').find(line => line.trim()) ?? '').trim();
    if (first.length > 100) {
      first = `${first.slice(0, 99)}…`;
    }
    node.appendChild(
      el(
        'span',
        'jp-Phoenix-approvalText',
        `${mark} write access ${decision}${first ? `: the agent asked “${first}”` : ''}`
      )
    );
    return;
  }
  node.classList.add('jp-Phoenix-approvalBlock');
  node.dataset.phoenixPendingApproval = 'true';
  node.appendChild(el('div', 'jp-Phoenix-label', APPROVAL_TITLE));
  node.appendChild(el('div', 'jp-Phoenix-approveMeans', APPROVE_MEANS));
  if (reason) {
    node.appendChild(el('div', 'jp-Phoenix-note', REASON_LABEL));
    const quote = el('blockquote', 'jp-Phoenix-approvalReason', boundedReason(reason));
    quote.dataset.phoenixReason = '';
    node.appendChild(quote);
  }
  const paused = state.paused === true;
  node.appendChild(
    inlineCode('jp-Phoenix-approvalState', paused ? PAUSED_WORDS : 'waiting for your approval')
  );
  if (!paused && str(state.name) !== 'awaiting_mode_approval') {
    node.appendChild(inlineCode('jp-Phoenix-note', APPROVE_HOWTO));
  }
}

/** The reason's head (so many lines and characters), the rest counted. */
function boundedReason(reason: string): string {
  let shown = reason.split('\n').slice(0, REASON_MAX_LINES).join('\n').slice(0, REASON_MAX_CHARS);
  if (shown.length < reason.length) {
    shown = `${shown.trimEnd()} … (${(reason.length - shown.length).toLocaleString('en-US')} more characters)`;
  }
  return shown;
}

function subAgentsStep(node: HTMLElement, step: Loose): void {
  const agents = arr(step.agents).map(obj);
  node.appendChild(
    el('span', 'jp-Phoenix-label', agents.length === 1 ? '1 sub-agent' : `${agents.length} sub-agents`)
  );
  const list = el('ul', 'jp-Phoenix-agents');
  for (const agent of agents) {
    const outcome = str(agent.outcome) || 'pending';
    const item = el('li', `jp-Phoenix-agent ${variant('jp-Phoenix-outcome', outcome)}`);
    item.dataset.phoenixAgent = str(agent.conversation_id);
    item.dataset.phoenixOutcome = outcome;
    item.appendChild(el('span', `jp-Phoenix-badge ${variant('jp-Phoenix-outcome-badge', outcome)}`, outcome));
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
