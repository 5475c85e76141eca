// CSV cells for files a person opens in a spreadsheet: quoted when needed, and neutralized against
// formula injection (OWASP: cells starting with = + - @ tab or CR are prefixed with a single quote).
//
// A spreadsheet's separator depends on its locale: `,` in most, `;` where the decimal mark is a comma,
// tab for pasted text. A cell holding any of them is quoted, so `x;=cmd|' /C calc'!A0` stays one cell
// (unquoted, a `;` locale splits it and runs `=cmd...` as a formula). Leading spaces do not hide a
// formula from every spreadsheet either: ` =1+1` is neutralized like `=1+1`.

/** A formula start: = + - @ after any leading whitespace, or a tab or CR first. */
const FORMULA_START = /^(?:\s*[=+\-@]|[\t\r])/;

/** Characters that make a cell quoted: the quote itself, line breaks, and every common separator. */
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
