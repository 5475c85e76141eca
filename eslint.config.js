import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'out/**', 'coverage/**', '.test-cli*/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-console': 'error',
      // zod's named export `z` is its namespace as one object: a bundle keeps all of it, every locale
      // (0.75 MB of what status compiled); `import * as z` keeps what is used (docs/benchmarks.md).
      'no-restricted-syntax': [
        'error',
        {
          selector: "ImportDeclaration[source.value='zod'] > ImportSpecifier[imported.name='z']",
          message: "import * as z from 'zod' (the bundle keeps what is used)",
        },
      ],
    },
  },
  {
    // A function a person can hold: split by step, not by accident. The test helpers, benchmarks and
    // scripts are code the suite and its readers depend on too; a test file's describe() is a list of
    // cases, not a function to hold, and is left out.
    files: ['src/**/*.ts', 'test/helpers/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    // The dashboard's own scripts run in the browser, each a classic script (an IIFE), not a module: only
    // the browser globals they use are known, so a Node global or a typo fails here, not in a user's page.
    files: ['src/dashboard/public/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: {
        document: 'readonly',
        window: 'readonly',
        fetch: 'readonly',
        EventSource: 'readonly',
        DOMParser: 'readonly',
        setTimeout: 'readonly',
        setInterval: 'readonly',
        process: 'off',
      },
    },
  },
  {
    // bin/ (bin/package.json) and the checkout's build step are CommonJS: a start that loads no ES module
    // skips Node's ES module loader (bin/learner-transfer.js).
    files: ['bin/**/*.js', 'scripts/**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The CLI, the benchmarks and scripts talk to a person on a terminal; everything else logs through pino.
    files: ['src/cli/**', 'bench/**', 'scripts/**', 'bin/**', 'test/**'],
    rules: { 'no-console': 'off' },
  },
);
