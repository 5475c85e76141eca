// NOTIFY_WEBHOOK_URL is a secret as a whole: a Slack or Teams incoming webhook's path is its key (anyone
// who has it can post to the channel). It is never logged or echoed: messages show its scheme and host
// only, and the logger scrubs every part of it that could name it (the URL, its path and query, a
// password in it).

/** What a message may show of the webhook: `https://hooks.slack.com/***`. */
export function maskWebhookUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}/***`;
  } catch {
    return '(unreadable URL, not shown)';
  }
}

/** The forms of the webhook URL to scrub from logs and messages: the URL, its path + query, a password. */
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
