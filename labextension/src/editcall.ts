/**
 * An edit_cell / insert_cell call in the conversation record: which cell, the agent's
 * explanation, and the diff against the cell as the kernel last saw it (every line as
 * context, so it also reads as the whole new cell). Where no front end applied the
 * proposal (nbconvert, papermill, a saved notebook) this is what the reader has.
 *
 * Everything the model wrote is set as text: the explanation is never parsed as HTML
 * or Markdown here, so it cannot draw anything that looks like phoenix's controls.
 */

import { diffLineKind } from './diff';
import { Loose, mark, num, sourceWarning, splitLines, str } from './record';

function el(tag: string, className: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** Fills `node` for one edit_cell or insert_cell call (`display`: core/displays.py). */
export function cellEditCall(
  node: HTMLElement,
  input: Loose,
  result: Loose | null,
  display: Loose
): void {
  const cellId = str(display.cell_id) || str(input.cell_id);
  const position = str(display.position) || str(input.position) || 'replace';
  const count = num(display.execution_count);
  const run = count !== null ? ` (In [${count}])` : '';
  const where =
    position === 'replace' ? `cell ${cellId}${run}` : `new cell ${position} cell ${cellId}${run}`;
  const head = el('div', 'jp-Phoenix-callHead');
  const label = el('code', 'jp-Phoenix-path', where);
  label.dataset.phoenixEditCell = cellId;
  head.appendChild(label);
  const id = str(display.edit_id);
  if (id) {
    head.appendChild(el('span', 'jp-Phoenix-note', ` ${id} · proposed, not applied here`));
  }
  node.appendChild(head);
  const explanation = str(display.explanation) || str(input.explanation);
  if (explanation) {
    const why = el('div', 'jp-Phoenix-note jp-Phoenix-editWhy', explanation);
    why.style.whiteSpace = 'pre-wrap';
    node.appendChild(why);
  }
  const diffText = str(display.cell_diff).replace(/\n$/, '');
  const raw = [display.new_source, input.new_source, input.source].find(
    v => typeof v === 'string' && v !== ''
  );
  const source = typeof raw === 'string' ? raw : '';
  const warning = sourceWarning(source);
  if (warning) {
    const line = el('div', 'jp-Phoenix-note jp-Phoenix-hiddenChars', warning);
    line.dataset.phoenixHiddenChars = '';
    node.appendChild(line);
  }
  const diff = el('pre', 'jp-Phoenix-pre jp-Phoenix-diff');
  diff.dataset.phoenixCellDiff = cellId;
  // the diff's lines were split as Python splits them (tools/cell_edits.py cell_diff)
  const rows = diffText
    ? diffText.split('\n')
    : splitLines(source).map(line => `+${mark(line)}`);
  for (const line of rows) {
    const kind = diffLineKind(line);
    const span = el('span', `jp-Phoenix-diffLine jp-Phoenix-diff-${kind}`, line);
    span.dataset.phoenixDiffLine = kind;
    diff.appendChild(span);
  }
  node.appendChild(diff);
  if (result === null) {
    node.appendChild(el('div', 'jp-Phoenix-note', 'running…'));
  } else if (result.is_error === true) {
    node.appendChild(el('pre', 'jp-Phoenix-output jp-Phoenix-output-error', str(result.content)));
  }
}
