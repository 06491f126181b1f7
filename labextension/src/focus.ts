/**
 * Keeping the keyboard in the notebook when a phoenix control is clicked.
 *
 * The live controls (Approve, Deny, Cancel …) are ipywidgets buttons inside an
 * element with the class `jp-Phoenix-controls`. A plain click gives the button
 * the focus and makes its cell the active one; once the button hides (the
 * request is answered), the focus falls to the page body and Shift+Enter does
 * nothing until the reader clicks a cell. So a mouse press on a control is kept
 * from moving the focus and from reaching the notebook's own mousedown handler:
 * the click still reaches the button, and the cell that was active before (the
 * next cell, after Shift+Enter ran the phoenix cell) stays active and focused.
 */

const CONTROLS = '.jp-Phoenix-controls';
const INSTALLED = '__phoenixFocusReturn';

function onMouseDown(event: MouseEvent): void {
  const target = event.target instanceof Element ? event.target : null;
  const controls = target?.closest(CONTROLS);
  if (!controls || event.button !== 0) {
    return;
  }
  const control = target?.closest('button, .widget-button, .jupyter-button');
  if (!control) {
    return; // text inputs in a control panel must still take the focus
  }
  event.preventDefault(); // the button does not take the focus
  // The notebook listens on its own node: stop the press before it gets there.
  controls.addEventListener('mousedown', e => e.stopPropagation(), { once: true });
}

/** Installs the handler once per page (the module may be loaded more than once). */
export function installFocusReturn(): void {
  const w = window as unknown as { [INSTALLED]?: boolean };
  if (w[INSTALLED]) {
    return;
  }
  w[INSTALLED] = true;
  document.addEventListener('mousedown', onMouseDown, true);
}
