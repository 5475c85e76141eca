// CSV cells for files a person opens in a spreadsheet: quoted when needed, and neutralized against
// formula injection (OWASP: cells starting with = + - @ tab or CR are prefixed with a single quote).

const FORMULA_START = /^[=+\-@\t\r]/;

export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text =
    typeof value === 'string'
      ? value
      : typeof value === 'number' || typeof value === 'boolean'
        ? String(value)
        : JSON.stringify(value);
  // Numbers we write (ids, statuses, negative counts are not ours) are safe as they are.
  if (typeof value === 'string' && FORMULA_START.test(text)) text = `'${text}`;
  if (/[",\r\n]/.test(text)) text = `"${text.replace(/"/g, '""')}"`;
  return text;
}

export function csvLine(values: readonly unknown[]): string {
  return `${values.map(csvCell).join(',')}\n`;
}
