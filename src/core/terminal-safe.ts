// Text from outside (the service's messages, a CSV's cells, Redis's errors) on its way to a
// terminal, which runs what it is sent (OSC 52, a CR, a bidi override): escape sequences go
// whole, then C0 but \n and \t, DEL, C1 and the bidi controls.

/** ESC-led sequences: OSC (to BEL or ST), CSI (parameters to a final byte), and two-byte ESC x. */
const ESCAPE_SEQUENCE =
  // eslint-disable-next-line no-control-regex
  /\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b\[[0-?]*[ -/]*[@-~]?|\u001b[ -~]?|\u009d[^\u0007\u009c]*[\u0007\u009c]?|\u009b[0-?]*[ -/]*[@-~]?/g;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex
const CONTROL_OR_LAYOUT = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `text` safe to print; `\n` and `\t` stay unless `singleLine` is set. */
export function forTerminal(text: string, options: { singleLine?: boolean } = {}): string {
  const stripped = text.replace(ESCAPE_SEQUENCE, '');
  return options.singleLine ? stripped.replace(CONTROL_OR_LAYOUT, ' ') : stripped.replace(CONTROL, '');
}

const JSON_UNSAFE = /[\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * JSON text (a line of NDJSON) safe to print, losslessly: DEL, C1 and the bidi controls, which
 * JSON.stringify passes raw, become `\uXXXX` escapes.
 */
export function jsonForTerminal(json: string): string {
  return json.replace(JSON_UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
