// deploy/kubernetes and deploy/prometheus, checked without a cluster: every object against the
// Kubernetes schemas and types (test/helpers/manifests.ts), and against the program itself: every variable
// the pods get is one config.ts reads and every value passes its checks, every argument is a flag of the
// command, every probe an open path on the port the command serves, the grace period longer than the
// drain work.ts bounds, the hardening on every container, the volumes where the variables point.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENV_VARIABLES, loadConfig } from '../../src/core/config.ts';
import { PUBLIC_PATHS } from '../../src/core/http-access.ts';
import { buildProgram } from '../../src/cli/run.ts';
import { Cli } from '../../src/cli/io.ts';
import { workDrainBoundMs } from '../../src/cli/work.ts';
import { ROOT } from '../helpers/cli.ts';
import {
  find,
  loadManifests,
  MANIFEST_DIR,
  parseYaml,
  podSpecs,
  schemaProblem,
  unknownFieldProblems,
  type Obj,
} from '../helpers/manifests.ts';

const manifests = loadManifests();
const pods = podSpecs(manifests);
const containers = pods.flatMap((p) => (p.spec.containers as Obj[]).map((c) => ({ pod: p, c })));
const config = find(manifests, 'ConfigMap', 'learner-transfer-config').data as Record<string, string>;
/** What the last audit archive pass, closing Redis and the exit may take after the drain (operations.md). */
const TAIL_AFTER_DRAIN_S = 20;

describe('deploy/kubernetes', () => {
  it('holds the objects the deployment needs, each listed in kustomization.yaml', () => {
    const kinds = manifests.map((m) => `${m.doc.kind}/${m.doc.metadata.name}`).sort();
    expect(kinds).toEqual(
      expect.arrayContaining([
        'StatefulSet/learner-transfer-work',
        'Deployment/learner-transfer-dashboard',
        'Service/learner-transfer-dashboard',
        'Service/learner-transfer-work',
        'PodDisruptionBudget/learner-transfer-work',
        'ConfigMap/learner-transfer-config',
        'Secret/learner-transfer-tokens',
        'Secret/learner-transfer-dashboard',
      ]),
    );
    const [kustomization] = parseYaml(
      'kustomization.yaml',
      readFileSync(join(MANIFEST_DIR, 'kustomization.yaml'), 'utf8'),
    );
    const files = readdirSync(MANIFEST_DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    expect([...(kustomization?.resources as string[])].sort()).toEqual(files.sort());
  });

  it('validates against the Kubernetes schemas, with no field the API does not know', () => {
    expect(manifests.map((m) => schemaProblem(m)).filter(Boolean)).toEqual([]);
    expect(unknownFieldProblems(manifests)).toEqual([]);
  });

  it('sets only variables config.ts reads, with values it accepts, and every reference resolves', () => {
    const known = new Set(ENV_VARIABLES);
    const set: string[] = [];
    for (const { c } of containers) {
      for (const e of (c.env ?? []) as Obj[]) {
        set.push(e.name);
        const ref = e.valueFrom?.secretKeyRef as Obj | undefined;
        if (ref) expect(find(manifests, 'Secret', ref.name).stringData, e.name).toHaveProperty([ref.key]);
      }
      for (const from of (c.envFrom ?? []) as Obj[]) {
        expect(from.configMapRef, 'envFrom takes the ConfigMap only').toBeDefined();
        set.push(...Object.keys(find(manifests, 'ConfigMap', from.configMapRef.name).data));
      }
    }
    expect(set.filter((name) => !known.has(name))).toEqual([]);
    // Each value passes config.ts's own checks (the token file is a mount: stand a token in for it).
    const { LEARNER_API_TOKENS_FILE: tokensFile, ...rest } = config;
    expect(tokensFile).toBeDefined();
    const parsed = loadConfig(
      { ...rest, LEARNER_API_TOKENS: 'acme:placeholder-token' },
      { requireBaseUrl: true },
    );
    expect(parsed.spoolDir).toBe(config.SPOOL_DIR);
  });

  it('runs commands and flags the CLI has, and the probes hit open paths on the port the command serves', () => {
    const cli = new Cli({ env: {}, stdout: process.stdout, stderr: process.stderr });
    const program = buildProgram(cli);
    // Its listeners leave process.stdout: the next file of this process must not inherit them.
    cli.dispose();
    for (const { c, pod } of containers) {
      const [name, ...args] = c.args as string[];
      const command = program.commands.find((x) => x.name() === name);
      expect(command, `${pod.file}: command ${name}`).toBeDefined();
      const flags = new Set(command!.options.map((o) => o.long));
      const given = args.filter((a) => a.startsWith('--'));
      expect(
        given.filter((f) => !flags.has(f)),
        `${pod.file}: flags of ${name}`,
      ).toEqual([]);
      const flag = (f: string) => args[args.indexOf(f) + 1];
      const portFlag = name === 'work' ? '--metrics-port' : '--port';
      const hostFlag = name === 'work' ? '--metrics-host' : '--host';
      // Reachable by the kubelet and Prometheus: every address, hence a token (the command refuses
      // otherwise: see work.ts checkMetricsHost) ...
      expect(flag(hostFlag), `${pod.file}: ${hostFlag}`).toBe('0.0.0.0');
      expect((c.env as Obj[]).map((e) => e.name)).toContain('DASHBOARD_TOKEN');
      // ... and the probes on the port the command listens on, by the port's name.
      const ports = new Map((c.ports as Obj[]).map((p) => [p.name, p.containerPort]));
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        const get = c[probe]?.httpGet as Obj | undefined;
        if (!get) continue;
        expect(PUBLIC_PATHS.has(get.path), `${pod.file} ${probe} ${get.path}`).toBe(true);
        expect(String(ports.get(get.port)), `${pod.file} ${probe} port ${get.port}`).toBe(flag(portFlag));
      }
      expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
      expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
    }
  });

  it('gives the workers a grace period longer than their drain on SIGTERM', () => {
    const timeoutMs = loadConfig({ REQUEST_TIMEOUT: config.REQUEST_TIMEOUT }).requestTimeoutMs;
    const work = pods.find((p) => p.name === 'learner-transfer-work')!;
    const grace = work.spec.terminationGracePeriodSeconds as number;
    expect(grace).toBeGreaterThanOrEqual(workDrainBoundMs(timeoutMs) / 1000 + TAIL_AFTER_DRAIN_S);
    // The compose file's stop grace follows the same formula.
    const compose = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
    for (const m of compose.matchAll(/stop_grace_period: (\d+)s/g)) expect(Number(m[1])).toBe(grace);
  });

  it('hardens every pod and container: non-root, read-only root, no capability, RuntimeDefault seccomp', () => {
    for (const p of pods) {
      expect(p.spec.securityContext, p.file).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 1000, // the image's `node` user (Dockerfile USER node)
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(p.spec.automountServiceAccountToken, p.file).toBe(false);
    }
    for (const { c, pod } of containers) {
      expect(c.securityContext, pod.file).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('mounts a volume wherever a variable points the program at a directory, the spool per slot', () => {
    const work = find(manifests, 'StatefulSet', 'learner-transfer-work');
    const spec = work.spec.template.spec as Obj;
    const mounts = new Map(((spec.containers[0] as Obj).volumeMounts as Obj[]).map((m) => [m.mountPath, m]));
    const volumes = new Map((spec.volumes as Obj[]).map((v) => [v.name, v]));
    const claims = new Set((work.spec.volumeClaimTemplates as Obj[]).map((t) => t.metadata.name));
    // The spool: this slot's own claim, kept when the set is scaled down or deleted.
    expect(claims.has(mounts.get(config.SPOOL_DIR)?.name)).toBe(true);
    expect(work.spec.persistentVolumeClaimRetentionPolicy).toEqual({
      whenDeleted: 'Retain',
      whenScaled: 'Retain',
    });
    // The archive and the drift reports: one claim the whole fleet shares.
    for (const dir of [config.AUDIT_ARCHIVE_DIR, config.DRIFT_REPORT_DIR]) {
      const claim = volumes.get(mounts.get(dir!)?.name)?.persistentVolumeClaim?.claimName;
      expect(claim, dir).toBe('learner-transfer-files');
      expect(find(manifests, 'PersistentVolumeClaim', claim).spec.accessModes).toEqual(['ReadWriteMany']);
    }
    // The token file: the Secret's key, at the path the variable names, owner-only.
    for (const p of pods) {
      const m = ((p.spec.containers[0] as Obj).volumeMounts as Obj[]).find(
        (x) => x.mountPath === dirname(config.LEARNER_API_TOKENS_FILE!),
      );
      const secret = (p.spec.volumes as Obj[]).find((v) => v.name === m?.name)?.secret as Obj;
      expect(secret?.defaultMode, p.file).toBe(0o400);
      const key = config.LEARNER_API_TOKENS_FILE!.split('/').pop()!;
      expect(find(manifests, 'Secret', secret.secretName).stringData).toHaveProperty([key]);
      expect(m?.readOnly).toBe(true);
    }
  });

  it('spreads disruptions one worker at a time, and every selector finds its pods', () => {
    const pdb = find(manifests, 'PodDisruptionBudget', 'learner-transfer-work').spec as Obj;
    expect(pdb.maxUnavailable).toBe(1);
    expect(pdb.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
    const work = pods.find((p) => p.name === 'learner-transfer-work')!;
    expect(work.labels).toMatchObject(pdb.selector.matchLabels);
    for (const svc of manifests.filter((m) => m.doc.kind === 'Service')) {
      const matched = pods.filter((p) =>
        Object.entries(svc.doc.spec.selector).every(([k, v]) => p.labels[k] === v),
      );
      expect(matched.length, svc.file).toBe(1);
    }
    expect(find(manifests, 'StatefulSet', 'learner-transfer-work').spec.serviceName).toBe(
      'learner-transfer-work',
    );
    expect(find(manifests, 'Service', 'learner-transfer-work').spec.clusterIP).toBe('None');
  });
});

describe('deploy/prometheus/scrape.yml', () => {
  const [scrape] = parseYaml(
    'scrape.yml',
    readFileSync(join(ROOT, 'deploy', 'prometheus', 'scrape.yml'), 'utf8'),
  );
  it('scrapes each Service on its named port with the Bearer token from the Secret', () => {
    const jobs = scrape?.scrape_configs as Obj[];
    expect(jobs.map((j) => j.job_name)).toEqual(['learner-transfer-work', 'learner-transfer-dashboard']);
    const secret = find(manifests, 'Secret', 'learner-transfer-dashboard').stringData as Obj;
    for (const job of jobs) {
      expect(job.metrics_path).toBe('/metrics');
      expect(job.authorization.type).toBe('Bearer');
      expect(Object.keys(secret)).toContain(String(job.authorization.credentials_file).split('/').pop());
      const [service, port] = String(job.relabel_configs[0].regex).split(';');
      const svc = find(manifests, 'Service', service!);
      expect((svc.spec.ports as Obj[]).map((p) => p.name)).toContain(port);
    }
  });
});
