/**
 * Classifying unified-diff lines so additions, removals and hunk headers can be
 * coloured. Kept apart from the DOM code so the rule is easy to read and change.
 */

/** The role of one line of a unified diff. */
export type DiffLineKind = 'add' | 'del' | 'hunk' | 'file' | 'ctx';

/**
 * The role of `line` in a unified diff.
 *
 * File headers (`---`/`+++`) are checked before single `-`/`+` so a header is
 * not mistaken for a removal or addition.
 */
export function diffLineKind(line: string): DiffLineKind {
  if (line.startsWith('+++') || line.startsWith('---')) {
    return 'file';
  }
  if (line.startsWith('@@')) {
    return 'hunk';
  }
  if (line.startsWith('+')) {
    return 'add';
  }
  if (line.startsWith('-')) {
    return 'del';
  }
  return 'ctx';
}
