// "Nothing overflows its box", checked in a real browser: every element of <main> (and the page itself)
// whose content is wider than its box (scrollWidth > clientWidth), named by what it is and the card it
// is in. A box that scrolls sideways on purpose (overflow-x auto or scroll) is listed apart, so a test
// can allow it where a wide table is meant to scroll. Plain JavaScript run in the page (the project's
// TypeScript has no DOM types).
import type { Page } from 'playwright-core';

export interface Overflows {
  /** Elements whose content is wider than their box and not meant to scroll: "what in where (by N px)". */
  overflow: string[];
  /** Boxes that scroll sideways on purpose and have to now. */
  scrolling: string[];
}

const SCRIPT = `(() => {
  const name = (el) => {
    const data = [...el.attributes]
      .filter((a) => a.name.startsWith('data-') && a.value.length < 40)
      .map((a) => '[' + a.name + '="' + a.value + '"]')
      .join('');
    const own = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      [...el.classList].map((c) => '.' + c).join('') + data;
    const home = el.parentElement && el.parentElement.closest('[data-org],[data-run]');
    if (!home) return own;
    const key = home.hasAttribute('data-org') ? 'data-org' : 'data-run';
    return own + ' in ' + home.tagName.toLowerCase() + '[' + key + '="' + home.getAttribute(key) + '"]';
  };
  const out = { overflow: [], scrolling: [] };
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth)
    out.overflow.push('the page (by ' + (root.scrollWidth - root.clientWidth) + ' px)');
  for (const el of document.querySelectorAll('main, main *')) {
    // Inside an SVG only the <svg> itself has a CSS box; an inline element's clientWidth is 0.
    if (el instanceof SVGElement && !(el instanceof SVGSVGElement)) continue;
    const style = getComputedStyle(el);
    if (style.display === 'inline' || style.display === 'none' || el.clientWidth === 0) continue;
    const over = el.scrollWidth - el.clientWidth;
    if (over <= 1) continue;
    const what = name(el) + ' (by ' + over + ' px)';
    if (style.overflowX === 'auto' || style.overflowX === 'scroll') out.scrolling.push(what);
    else out.overflow.push(what);
  }
  return out;
})()`;

export function findOverflows(page: Page): Promise<Overflows> {
  return page.evaluate(SCRIPT) as Promise<Overflows>;
}
