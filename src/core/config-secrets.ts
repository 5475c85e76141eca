// The secrets of a config (tokens, the proxy's password, the webhook URL, the dashboard's
// tokens), and how a JSON dump of the config keeps them out.
import type { Config } from './config-type.ts';
import type { EnvValues } from './config-schema.ts';
import { proxySecrets, type Egress } from './egress.ts';
import { webhookSecrets } from './webhook-url.ts';

/** Secrets and what holds them, kept out of a JSON dump of the config. */
export function withHiddenSecrets(config: Config, e: EnvValues, egress: Egress): Config {
  for (const [key, value] of [
    ['dashboardToken', e.DASHBOARD_TOKEN],
    ['dashboardReadToken', e.DASHBOARD_READ_TOKEN],
    ['egress', Object.freeze(egress)],
    ['notifyWebhookUrl', e.NOTIFY_WEBHOOK_URL],
  ] as const)
    Object.defineProperty(config, key, { value, enumerable: false });
  return config;
}

/** Every token secret of a config, for redaction and for tests that prove none leaked. */
export function secretsOf(config: Config): string[] {
  // And the secrets fixed for the process's life: an error may quote any of them.
  return [...config.tokens.map((t) => t.secret), ...fixedSecretsOf(config)];
}

/**
 * Secrets fixed for the process's life, beside the tokens and DASHBOARD_TOKEN, scrubbed from
 * every log line.
 */
export function fixedSecretsOf(config: Config): string[] {
  return [
    ...egressSecretsOf(config),
    ...webhookSecrets(config.notifyWebhookUrl),
    ...(config.dashboardReadToken ? [config.dashboardReadToken] : []),
  ];
}

/** The passwords of the proxy URLs the config uses, as written and decoded (core/egress.ts). */
export function egressSecretsOf(config: Config): string[] {
  return proxySecrets({ HTTP_PROXY: config.egress?.httpProxy, HTTPS_PROXY: config.egress?.httpsProxy });
}
