import neostandard from 'neostandard'

// neostandard (as fastify/demo), with three local choices:
// - compact one-line object literals are allowed (rows, settings, test fixtures read better on one line);
// - trailing commas in multi-line literals, as the code base writes them (smaller diffs);
// - `void` marks a deliberately unawaited promise, in statements and in arrow bodies.
export default [
  ...neostandard({ ts: true, ignores: ['node_modules/**', 'data/**', '.tap/**', 'client/dist/**'] }),
  {
    rules: {
      '@stylistic/object-property-newline': 'off',
      '@stylistic/object-curly-newline': 'off',
      '@stylistic/comma-dangle': ['error', 'always-multiline'],
      'no-void': 'off',
    },
  },
  {
    // Settings are validated once, in src/config.ts; CLI entry points get them from loadConfig().
    files: ['src/**/*.ts'],
    ignores: ['src/config.ts'],
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'read settings through loadConfig() in src/config.ts' }],
    },
  },
]
