// Types of compile.mjs for the TypeScript that imports it (test/helpers/cli-build.ts).
export function rewriteImports(code: string): string;
export function compileTree(src: string, out: string): Promise<void>;
