/**
 * Reading the conversation record defensively.
 *
 * The record arrives from a notebook file that anyone may have edited, so no
 * field is trusted to have the documented type: every accessor returns a safe
 * default instead of throwing, and `checkRecord` names what is wrong when the
 * record cannot be drawn at all (docs/record-format.md).
 */

/** The MIME type this extension renders. */
export const MIME_TYPE = 'application/vnd.phoenix.conversation+json';

/** The only record format version this renderer understands. */
export const RECORD_FORMAT = 'phoenix.conversation/1';

/** A JSON object whose fields have not been checked yet. */
export type Loose = { readonly [key: string]: unknown };

/** The object at `value`, or an empty one, so chains of look-ups never throw. */
export function obj(value: unknown): Loose {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Loose)
    : {};
}

/** The object at `value`, or null when it is absent or not an object. */
export function objOrNull(value: unknown): Loose | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Loose)
    : null;
}

/** The array at `value`, or an empty one. */
export function arr(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

/**
 * Characters that change how other text looks instead of showing themselves, or are drawn
 * as nothing: C0/C1 controls other than tab, newline and carriage return, bidirectional
 * marks, overrides and isolates (which can reverse the words drawn after them), and
 * zero-width and invisible characters (tag characters and supplementary variation
 * selectors included). Shown as codes. The same set as phoenix_nb/core/marks.py `HIDING`.
 */
const HIDING =
  // eslint-disable-next-line no-control-regex, no-misleading-character-class
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\u{1d173}-\u{1d17a}\u{e0000}-\u{e007f}\u{e0100}-\u{e01ef}]/gu;

/** `s` with every hiding character shown as its code (`<U+202E>`), nothing dropped. */
export function mark(s: string): string {
  return s.replace(
    HIDING,
    c =>
      `<U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}>`
  );
}

/** Where Python's `str.splitlines` (and so IPython, before it runs a cell) splits. */
const LINE_BREAK = /\r\n|[\n\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029]/;
// eslint-disable-next-line no-control-regex
const ODD_BREAK = /\r(?!\n)|[\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029]/gu;

/** The lines of `source` as Python's `str.splitlines` gives them. */
export function splitLines(source: string): string[] {
  if (source === '') {
    return [];
  }
  const parts = source.split(LINE_BREAK);
  if (parts[parts.length - 1] === '' && LINE_BREAK.test(source.slice(-1))) {
    parts.pop();
  }
  return parts;
}

/** One line saying that `source` holds characters a reader would not see, or ''
 * (the words of phoenix_nb/core/marks.py `source_warning`). */
export function sourceWarning(source: string): string {
  const found = new Map<string, number>();
  const count = (c: string): void => {
    const code = `U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
    found.set(code, (found.get(code) ?? 0) + 1);
  };
  for (const m of source.matchAll(HIDING)) {
    if (!LINE_BREAK.test(m[0])) {
      count(m[0]); // a line break is counted once, below
    }
  }
  for (const m of source.matchAll(ODD_BREAK)) {
    count(m[0]);
  }
  if (found.size === 0) {
    return '';
  }
  const codes = [...found.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([code, n]) => (n > 1 ? `${code} ×${n}` : code))
    .join(', ');
  return (
    `⚠ This code contains characters that are invisible or change how it reads (${codes}): ` +
    'each is shown as <U+…>, and each line break other than a newline starts a new line ' +
    'here, as Python runs it.'
  );
}

/** Terminal control sequences (colours, cursor moves): dropped whole, as the fallbacks do. */
// eslint-disable-next-line no-control-regex
const CSI = /\u001b\[[0-?]*[ -/]*[@-~]/g;

/** `s` with terminal control sequences dropped and every other control character shown
 * as its code (`<U+001B>`), not obeyed. */
export function inert(s: string): string {
  return mark(s.replace(CSI, ''));
}

/**
 * The working folder as a shared record shows it: relative to a home (`~/…`).
 * The absolute path names the user and tells a reader nothing they need; the
 * same rule as the fallbacks' `view.shown_cwd`.
 */
export function shownCwd(cwd: string): string {
  return cwd.replace(/^\/(?:home|Users)\/[^/]+(?=\/|$)|^\/root(?=\/|$)/, '~');
}

/** A string for display: strings with controls made visible (`inert`), numbers and
 * booleans printed, anything else empty. */
export function str(value: unknown): string {
  if (typeof value === 'string') {
    return inert(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean') {
    return String(value);
  }
  return '';
}

/** A finite number, or null. */
export function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/**
 * Why the record cannot be drawn, or null when it can.
 *
 * Only the envelope is checked here; individual steps with unexpected shapes
 * are drawn as far as possible rather than rejecting the whole record.
 */
export function checkRecord(data: unknown): string | null {
  const record = objOrNull(data);
  if (record === null) {
    return 'the record is not a JSON object';
  }
  if (record.format !== RECORD_FORMAT) {
    return `unsupported record format ${JSON.stringify(record.format ?? null)} (this renderer reads "${RECORD_FORMAT}")`;
  }
  if (!Array.isArray(record.cycles)) {
    return 'the record has no "cycles" list';
  }
  return null;
}
