// ESLint for the repository's TypeScript and JavaScript: `pnpm lint` runs it from the root
// (`eslint -c tools/lint/eslint.config.js .`, so paths here are relative to the root).
//
// Rules that catch defects, not style (prettier owns the layout), and none that needs type
// information: typescript-eslint parses each file alone, so a run takes seconds. TypeScript's
// own checks (pnpm typecheck) already cover undefined names, wrong arity and unreachable code.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/',
      '**/dist/',
      'release/',
      'docs/api/',
      'packages/native/build/',
      'packages/native/build-*/',
      'packages/native/prebuilds/',
      'build-sanitize/',
    ],
  },
  {
    files: ['**/*.{ts,tsx,mts,cts,js,mjs,cjs}'],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: { ...globals.node, ...globals.browser },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Beyond the recommended sets: each catches a defect that type-checks.
      eqeqeq: ['error', 'always', { null: 'ignore' }], // == coerces ('0' == 0); `x == null` is the one idiom kept
      'no-self-compare': 'error', // x === x is a NaN test: Number.isNaN says so
      'no-template-curly-in-string': 'error', // '${x}' in a plain string is a template that never runs
      'no-unreachable-loop': 'error',
      'array-callback-return': 'error', // a map/filter/find callback that returns nothing
      'no-constructor-return': 'error',
      'no-useless-assignment': 'error', // a value written and overwritten before any read
      // `let timer; const end = () => clearTimeout(timer); ... timer = setTimeout(...)`: a const
      // there would be read in its dead zone if `end` ran first.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      'no-fallthrough': ['error', { reportUnusedFallthroughComment: true }],
      // Destructuring to leave a key out (`const { a: _a, ...rest } = o`) and `_`-named
      // parameters a signature requires are deliberate.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { ignoreRestSiblings: true, argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
);
