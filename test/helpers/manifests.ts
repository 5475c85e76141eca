// Reading and checking deploy/kubernetes without a cluster: the YAML as Kubernetes parses it (YAML 1.1:
// `0400` is octal), each object against its Kubernetes schema (kubernetes-models: types, required fields,
// enums, formats) and, since those schemas let unknown fields pass, through TypeScript's excess-property
// check against the same models' types: a misspelt field (`readinessProbes`) fails as it would fail
// `kubectl apply --validate=strict`.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ROOT } from './cli.ts';

export const MANIFEST_DIR = join(ROOT, 'deploy', 'kubernetes');

/** The kinds the manifests may hold: the model that validates each, and the module of its type. */
const MODELS: Record<string, { model: { new (data: never): { validate(): void } }; module: string }> = {
  'v1/ConfigMap': { model: ConfigMap, module: 'kubernetes-models/v1/ConfigMap' },
  'v1/Secret': { model: Secret, module: 'kubernetes-models/v1/Secret' },
  'v1/Service': { model: Service, module: 'kubernetes-models/v1/Service' },
  'v1/PersistentVolumeClaim': {
    model: PersistentVolumeClaim,
    module: 'kubernetes-models/v1/PersistentVolumeClaim',
  },
  'apps/v1/Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment' },
  'apps/v1/StatefulSet': { model: StatefulSet, module: 'kubernetes-models/apps/v1/StatefulSet' },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget,
    module: 'kubernetes-models/policy/v1/PodDisruptionBudget',
  },
};

// The manifests are read as plain JSON-like data: the tests walk them with these loose types.
/* eslint-disable @typescript-eslint/no-explicit-any */
export type Obj = Record<string, any>;

export interface Manifest {
  file: string;
  doc: Obj;
}

/** Parses YAML the way Kubernetes does (YAML 1.1), failing on any parse error or warning. */
export function parseYaml(file: string, text: string): Obj[] {
  const docs = parseAllDocuments(text, { version: '1.1', prettyErrors: true });
  const out: Obj[] = [];
  for (const d of docs) {
    const problems = [...d.errors, ...d.warnings];
    if (problems.length) throw new Error(`${file}: ${problems.map((p) => p.message).join('; ')}`);
    const value = d.toJS() as Obj | null;
    if (value !== null) out.push(value);
  }
  return out;
}

/** Every object of every .yaml file under deploy/kubernetes but the kustomization. */
export function loadManifests(dir = MANIFEST_DIR): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.yaml') || file === 'kustomization.yaml') continue;
    for (const doc of parseYaml(file, readFileSync(join(dir, file), 'utf8'))) out.push({ file, doc });
  }
  return out;
}

function keyOf(doc: Obj): string {
  return `${String(doc.apiVersion)}/${String(doc.kind)}`;
}

/** The schema's verdict on one object: undefined when valid, else what is wrong. */
export function schemaProblem(m: Manifest): string | undefined {
  const entry = MODELS[keyOf(m.doc)];
  if (!entry) return `${m.file}: ${keyOf(m.doc)} is not a kind these tests know`;
  try {
    new entry.model(m.doc as never).validate();
    return undefined;
  } catch (err) {
    return `${m.file} ${String(m.doc.kind)} ${String(m.doc.metadata?.name)}: ${(err as Error).message}`;
  }
}

/**
 * Fields the types do not know, by TypeScript's excess-property check: each object becomes a literal
 * of its model's interface in one virtual file, compiled once. Returns the diagnostics, file and line.
 */
export function unknownFieldProblems(manifests: readonly Manifest[]): string[] {
  const lines: string[] = [];
  const origin: string[] = [];
  manifests.forEach((m, i) => {
    const entry = MODELS[keyOf(m.doc)];
    if (!entry) return;
    const name = entry.module.split('/').pop() as string;
    lines.push(`import type { I${name} as T${i} } from '${entry.module}';`);
    const body = JSON.stringify(m.doc, null, 1).split('\n');
    lines.push(`export const m${i}: T${i} = ${body[0]}`);
    for (const l of body.slice(1)) {
      lines.push(l);
      origin[lines.length] = `${m.file} ${String(m.doc.kind)}`;
    }
    lines[lines.length - 1] += ';';
  });
  const file = join(ROOT, 'deploy', '__manifests__.ts');
  const source = lines.join('\n');
  const host = ts.createCompilerHost({});
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) =>
    f === file ? ts.createSourceFile(f, source, lang) : read(f, lang, ...rest);
  const program = ts.createProgram(
    [file],
    {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: [],
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
    },
    host,
  );
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
    return `${origin[line] ?? '?'}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

/** The pod specs of the workloads, with the file and name of each. */
export function podSpecs(
  manifests: readonly Manifest[],
): { name: string; file: string; spec: Obj; labels: Obj }[] {
  return manifests
    .filter((m) => m.doc.kind === 'StatefulSet' || m.doc.kind === 'Deployment')
    .map((m) => ({
      name: String(m.doc.metadata.name),
      file: m.file,
      spec: m.doc.spec.template.spec as Obj,
      labels: m.doc.spec.template.metadata.labels as Obj,
    }));
}

export function find(manifests: readonly Manifest[], kind: string, name: string): Obj {
  const m = manifests.find((x) => x.doc.kind === kind && x.doc.metadata?.name === name);
  if (!m) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return m.doc;
}
