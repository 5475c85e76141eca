// Types of compile.mjs for the TypeScript that imports it (test/helpers/cli-build.ts).
export function packageOf(specifier: string): string;
export const META_FILE: string;
export function compileTree(src: string, out: string, options?: { metafile?: boolean }): Promise<void>;
