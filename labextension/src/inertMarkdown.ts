/**
 * Model-authored Markdown drawn as DOM that loads nothing and imitates nothing.
 *
 * Everything the model writes is hostile: it may try to make the viewer's
 * browser fetch a URL (an image, `<video>`, a stylesheet, CSS `url()`, `srcset`,
 * an SVG `<use>`, a font) or to draw something that looks like phoenix's own
 * state line or buttons. JupyterLab's own Markdown pipeline, even untrusted,
 * keeps remote images, media and inline styles (docs/platform-facts.md), so it is not
 * used for content.
 *
 * Why markdown-it: a well-kept CommonMark parser that, with `html: false`, never
 * produces an HTML token (raw HTML in the text stays text), and that hands out a
 * token stream instead of an HTML string. The DOM is built from those tokens with
 * `createElement` and `textContent` only, from a fixed list of tags and with no
 * attribute copied from content except a link's checked target and an ordered
 * list's start number; no HTML string from content ever reaches `innerHTML`, so
 * no sanitizer has to be right. An image becomes a visible link whose text is its
 * full target; every link shows its target after its text, so it can neither pass
 * for a control nor hide where it goes; only http(s) and mailto are clickable.
 * Sizes and colours come only from the stylesheet (headings are capped there).
 */

import MarkdownIt from 'markdown-it';

type Token = ReturnType<MarkdownIt['parse']>[number];

const PARSER = new MarkdownIt({ html: false, linkify: true, typographer: false, breaks: false });

/** Block and inline tags content may produce; anything else becomes a plain span/div. */
const TAGS = new Set([
  'p',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'ul',
  'ol',
  'li',
  'blockquote',
  'table',
  'thead',
  'tbody',
  'tr',
  'th',
  'td',
  'em',
  'strong',
  's',
  'code',
  'pre',
  'hr',
  'br'
]);

const CLICKABLE = /^(https?:\/\/|mailto:)/i;

/** The target a content link may point at, or '' when it must not be clickable. */
export function linkTarget(url: string): string {
  const trimmed = url.trim();
  return CLICKABLE.test(trimmed) ? trimmed : '';
}

function make(tag: string, block: boolean): HTMLElement {
  return document.createElement(TAGS.has(tag) ? tag : block ? 'div' : 'span');
}

function textNode(text: string): Text {
  return document.createTextNode(text);
}

/** `(target)` after a link, in the muted style every content link's target has. */
function targetNote(target: string): HTMLElement {
  const note = document.createElement('span');
  note.className = 'jp-Phoenix-href';
  note.textContent = ` (${target})`;
  return note;
}

/** `[image alt: <link to target>]`: what an image in content becomes. */
function imageLink(token: Token): HTMLElement {
  const src = token.attrGet('src') ?? '';
  const box = document.createElement('span');
  box.className = 'jp-Phoenix-imageLink';
  box.dataset.phoenixImageLink = src;
  box.appendChild(textNode(`[image${token.content ? ` ${token.content}` : ''}: `));
  const target = linkTarget(src);
  if (target) {
    box.appendChild(anchor(target, src));
  } else {
    const code = document.createElement('code');
    code.textContent = src;
    box.appendChild(code);
  }
  box.appendChild(textNode(']'));
  return box;
}

function anchor(href: string, text?: string): HTMLAnchorElement {
  const a = document.createElement('a');
  a.href = href;
  a.target = '_blank';
  a.rel = 'nofollow noopener noreferrer';
  a.className = 'jp-Phoenix-contentLink';
  if (text !== undefined) {
    a.textContent = text;
  }
  return a;
}

/** Inline tokens into `parent` (text, emphasis, code, links; images as links). */
function inline(tokens: readonly Token[], parent: HTMLElement): void {
  const stack: HTMLElement[] = [parent];
  const links: { node: HTMLElement; target: string; raw: string }[] = [];
  for (const token of tokens) {
    const top = stack[stack.length - 1];
    switch (token.type) {
      case 'text':
      case 'text_special':
        top.appendChild(textNode(token.content));
        break;
      case 'softbreak':
        top.appendChild(textNode('\n'));
        break;
      case 'hardbreak':
        top.appendChild(document.createElement('br'));
        break;
      case 'code_inline': {
        const code = document.createElement('code');
        code.textContent = token.content;
        top.appendChild(code);
        break;
      }
      case 'image':
        top.appendChild(imageLink(token));
        break;
      case 'link_open': {
        const raw = token.attrGet('href') ?? '';
        const target = linkTarget(raw);
        const node = target ? anchor(target) : document.createElement('span');
        top.appendChild(node);
        stack.push(node);
        links.push({ node, target, raw });
        break;
      }
      case 'link_close': {
        const link = links.pop();
        if (stack.length > 1) {
          stack.pop();
        }
        if (link !== undefined && (link.node.textContent ?? '').trim() !== link.raw.trim()) {
          stack[stack.length - 1].appendChild(targetNote(link.raw));
        }
        break;
      }
      default:
        if (token.nesting === 1) {
          const node = make(token.tag, false);
          top.appendChild(node);
          stack.push(node);
        } else if (token.nesting === -1) {
          if (stack.length > 1) {
            stack.pop();
          }
        } else if (token.content) {
          top.appendChild(textNode(token.content));
        }
    }
  }
}

/** Draws `source` (model Markdown) into `host`, replacing its children. */
export function renderInertMarkdown(host: HTMLElement, source: string): void {
  const tokens = PARSER.parse(source, {});
  const root = document.createDocumentFragment();
  const stack: (HTMLElement | DocumentFragment)[] = [root];
  for (const token of tokens) {
    const top = stack[stack.length - 1];
    if (token.type === 'inline') {
      const holder = document.createElement('span');
      inline(token.children ?? [], holder);
      top.append(...Array.from(holder.childNodes));
      continue;
    }
    if (token.type === 'fence' || token.type === 'code_block') {
      const pre = document.createElement('pre');
      const code = document.createElement('code');
      code.textContent = token.content;
      pre.appendChild(code);
      top.appendChild(pre);
      continue;
    }
    if (token.type === 'hr') {
      top.appendChild(document.createElement('hr'));
      continue;
    }
    if (token.nesting === 1) {
      if (token.hidden) {
        // A tight list's paragraph: its text goes straight into the list item.
        stack.push(top);
        continue;
      }
      const node = make(token.tag, true);
      if (token.type === 'ordered_list_open') {
        const start = Number(token.attrGet('start') ?? '1');
        if (Number.isInteger(start) && start > 1) {
          (node as HTMLOListElement).start = start;
        }
      }
      top.appendChild(node);
      stack.push(node);
    } else if (token.nesting === -1) {
      if (stack.length > 1) {
        stack.pop();
      }
    } else if (token.content) {
      top.appendChild(textNode(token.content));
    }
  }
  host.replaceChildren(root);
}
