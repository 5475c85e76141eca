// CSV cells for files a person opens in a spreadsheet: quoted when needed, and neutralized
// against formula injection (= + - @ tab or CR first, after any spaces, get a leading quote).
// Every locale's separator (`,` `;` tab) quotes a cell, so `x;=cmd|...` stays one cell
// everywhere.

/** A formula start: = + - @ after any leading whitespace, or a tab or CR first. */
const FORMULA_START = /^(?:\s*[=+\-@]|[\t\r])/;

/** Characters that make a cell quoted: the quote, line breaks, every common separator. */
const NEEDS_QUOTES = /[",;\t\r\n]/;

export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text =
    typeof value === 'string'
      ? value
      : typeof value === 'number' || typeof value === 'boolean'
        ? String(value)
        : JSON.stringify(value);
  // Numbers we write (ids, statuses, negative counts are not ours) are safe as they are.
  if (typeof value !== 'number' && typeof value !== 'boolean' && FORMULA_START.test(text)) text = `'${text}`;
  if (NEEDS_QUOTES.test(text)) text = `"${text.replace(/"/g, '""')}"`;
  return text;
}

export function csvLine(values: readonly unknown[]): string {
  return `${values.map(csvCell).join(',')}\n`;
}
