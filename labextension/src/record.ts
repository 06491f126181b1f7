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
 * Characters that change how other text looks instead of showing themselves: C0/C1
 * controls other than tab, newline and carriage return, and the bidirectional overrides
 * and isolates (which can reverse the words phoenix draws after them). Shown as codes.
 */
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** Terminal control sequences (colours, cursor moves): dropped whole, as the fallbacks do. */
// eslint-disable-next-line no-control-regex
const CSI = /\u001b\[[0-?]*[ -/]*[@-~]/g;

/** `s` with terminal control sequences dropped and every other control character shown
 * as its code (`<U+001B>`), not obeyed. */
export function inert(s: string): string {
  return s
    .replace(CSI, '')
    .replace(CONTROLS, c => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}>`);
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
