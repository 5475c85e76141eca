// Types of compile.mjs for the TypeScript that imports it (test/helpers/cli-build.ts).
export const EXTERNAL_PACKAGES: readonly string[];
export const META_FILE: string;
export function compileTree(src: string, out: string, options?: { metafile?: boolean }): Promise<void>;
