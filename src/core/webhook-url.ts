// NOTIFY_WEBHOOK_URL is a secret as a whole (a webhook's path is its key): messages show its
// scheme and host only, and the logger scrubs every part that could name it.

/** What a message may show of the webhook: `https://hooks.slack.com/***`. */
export function maskWebhookUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}/***`;
  } catch {
    return '(unreadable URL, not shown)';
  }
}

/** The forms of the webhook URL to scrub: the URL, its path + query, a password. */
export function webhookSecrets(url: string | undefined): string[] {
  if (!url) return [];
  const out = new Set<string>([url]);
  try {
    const u = new URL(url);
    out.add(u.href);
    const tail = `${u.pathname}${u.search}`;
    // A short path ("/", "/hook") names nothing secret, and scrubbing it would mangle every line.
    if (tail.length >= 8) out.add(tail);
    if (u.pathname.length >= 8) out.add(u.pathname);
    if (u.search.length >= 8) out.add(u.search);
    if (u.password) out.add(decodeURIComponent(u.password));
  } catch {
    // An unreadable URL is refused by the config; only the text itself is scrubbed.
  }
  return [...out];
}
