#!/usr/bin/env node
// The image's HEALTHCHECK (Dockerfile): slim images have no curl, so node asks the container's own process
// for /healthz. Which port depends on the command the container runs, read from that process's command
// line (/proc/PID/cmdline, PID 1 by default, or the pid given as the first argument):
//   work --metrics-port N [--metrics-host H]   http://H:N/healthz (H = 127.0.0.1 when a wildcard)
//   dashboard [--port N] [--host H]            http(s)://H:N/healthz (8080 by default; https with
//                                              DASHBOARD_TLS_CERT, whose certificate is not checked: it is
//                                              this container's own server)
//   anything else (work without a metrics port, simulate, enqueue ...)   healthy while it runs
// Exit 0 healthy, 1 not. /healthz is liveness (the event loop answers), not readiness: Redis refusing
// writes is /readyz's to say, and Docker restarts nothing on "unhealthy" anyway.
// CommonJS, as all of bin/ (bin/package.json): see learner-transfer.js.
const { readFileSync } = require('node:fs');
const { request: httpRequest } = require('node:http');
const { request: httpsRequest } = require('node:https');

const TIMEOUT_MS = 4000;

/** The value of `--name N` or `--name=N` in argv, or undefined. */
function flag(argv, name) {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === name) return argv[i + 1];
    if (argv[i].startsWith(`${name}=`)) return argv[i].slice(name.length + 1);
  }
  return undefined;
}

/** The probe's address for a host flag: a wildcard bind is reached on loopback. */
function probeHost(host) {
  if (!host || host === '0.0.0.0' || host === '::' || host === '[::]') return '127.0.0.1';
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** What to probe for this command line, or undefined when the command serves no probe. */
function probeTarget(argv, env = process.env) {
  const command = argv.find((a) => a === 'work' || a === 'dashboard');
  if (command === 'work') {
    const port = flag(argv, '--metrics-port');
    if (!port) return undefined;
    return { url: `http://${probeHost(flag(argv, '--metrics-host'))}:${port}/healthz`, tls: false };
  }
  if (command === 'dashboard') {
    const port = flag(argv, '--port') ?? '8080';
    const tls = Boolean(env.DASHBOARD_TLS_CERT && env.DASHBOARD_TLS_KEY);
    return { url: `${tls ? 'https' : 'http'}://${probeHost(flag(argv, '--host'))}:${port}/healthz`, tls };
  }
  return undefined;
}

function get(target) {
  return new Promise((resolve) => {
    const send = target.tls ? httpsRequest : httpRequest;
    const req = send(target.url, { timeout: TIMEOUT_MS, rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end();
  });
}

async function main() {
  const pid = process.argv[2] ?? '1';
  let argv;
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    process.stderr.write(`healthcheck: no process ${pid}\n`);
    return 1;
  }
  const target = probeTarget(argv);
  if (!target) return 0;
  const ok = await get(target);
  if (!ok) process.stderr.write(`healthcheck: ${target.url} did not answer 200\n`);
  return ok ? 0 : 1;
}

// Unsettled at the process's end (nothing left to wait on): 13, not healthy.
process.exitCode = 13;
void main().then((status) => {
  process.exitCode = status;
});
