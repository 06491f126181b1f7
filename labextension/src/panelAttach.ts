/**
 * What goes with the panel's next message besides its text: images pasted or dropped into
 * the message box, and a cell's outputs ("Attach output": its text and its images).
 *
 * The front end only gathers bytes and text; the kernel makes the images ready exactly as
 * `%phoenix chat`'s are (`llm.images.prepare_image`) and says which one it cannot send,
 * so a corrupt image is a notice there and nothing is lost here (the panel keeps its draft
 * until the kernel says `sent`). Each attachment is a chip the user can remove.
 *
 * The bytes travel in the comm message as base64, and the server's websocket takes messages
 * of at most 10 MiB (tornado's default `websocket_max_message_size`): the images of one
 * message are kept to `MAX_IMAGE_BYTES`, said plainly when a paste would pass it.
 */

import type { Cell, ICodeCellModel } from '@jupyterlab/cells';

/** Raw image bytes of one message, at most (base64 makes 4/3 of it, under 10 MiB). */
export const MAX_IMAGE_BYTES = 7 * 1024 * 1024;
/** The image types the Messages API takes as they are; others are converted by the kernel. */
const OUTPUT_IMAGES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

export interface IImage {
  name: string;
  /** base64, as the kernel's `send` takes it */
  data: string;
  bytes: number;
}

/** One chip: images (pasted, dropped, or a cell's) and output text. */
export interface IAttachment {
  label: string;
  images: IImage[];
  /** a cell's text outputs ("" for a pasted image) */
  text: string;
}

/** A pasted or dropped file's bytes as base64. */
export function readImage(file: File): Promise<IImage> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result ?? '');
      const comma = url.indexOf(',');
      resolve({ name: file.name || 'pasted image', data: url.slice(comma + 1), bytes: file.size });
    };
    reader.onerror = () => reject(reader.error ?? new Error(`cannot read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

const ANSI = new RegExp(String.fromCharCode(27) + '\\[[0-9;]*[A-Za-z]', 'g');

function joined(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  return Array.isArray(value) ? value.filter(v => typeof v === 'string').join('') : '';
}

/** The outputs of `cell` (text and images) as one attachment, or null when it has none. */
export function cellOutputs(cell: Cell | null): IAttachment | null {
  if (cell === null || cell.model.type !== 'code') {
    return null;
  }
  const model = cell.model as ICodeCellModel;
  const count = model.executionCount;
  const label = count !== null ? `cell [${count}]` : `cell ${model.id.slice(0, 8)}`;
  const texts: string[] = [];
  const images: IImage[] = [];
  model.outputs.toJSON().forEach((output, index) => {
    const kind = output.output_type;
    if (kind === 'stream') {
      texts.push(joined(output.text));
    } else if (kind === 'error') {
      const trace = Array.isArray(output.traceback) ? output.traceback.join('\n') : '';
      texts.push((trace || `${output.ename}: ${output.evalue}`).replace(ANSI, ''));
    } else if (kind === 'execute_result' || kind === 'display_data') {
      const data = (output.data ?? {}) as Record<string, unknown>;
      const mime = OUTPUT_IMAGES.find(type => typeof data[type] === 'string');
      if (mime !== undefined) {
        const b64 = String(data[mime]).replace(/\s/g, '');
        images.push({
          name: `${label} output ${index + 1}.${mime.split('/')[1]}`,
          data: b64,
          bytes: Math.floor((b64.length * 3) / 4)
        });
      } else if (data['text/plain'] !== undefined) {
        texts.push(joined(data['text/plain']).replace(ANSI, ''));
      }
    }
  });
  const text = texts.join('').trimEnd();
  if (!text && images.length === 0) {
    return null;
  }
  return { label: `output of ${label}`, images, text };
}

/** The attachments as the kernel's `send` takes them. */
export function wireAttachments(items: IAttachment[]): {
  images: Array<{ name: string; data: string }>;
  outputs: Array<{ label: string; text: string }>;
} {
  return {
    images: items.flatMap(item => item.images.map(({ name, data }) => ({ name, data }))),
    outputs: items.filter(item => item.text).map(item => ({ label: item.label, text: item.text }))
  };
}

export function imageBytes(items: IAttachment[]): number {
  return items.reduce((sum, item) => sum + item.images.reduce((s, i) => s + i.bytes, 0), 0);
}
