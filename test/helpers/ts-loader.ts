import { fileURLToPath } from 'node:url'

/** Node's arguments that load the TypeScript sources (src/ts-loader.mjs), for a test's child process. */
export const TS_LOADER_ARGS = ['--import', fileURLToPath(new URL('../../src/ts-loader.mjs', import.meta.url))]
