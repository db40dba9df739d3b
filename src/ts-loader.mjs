// The service's TypeScript loader: `node --import ./src/ts-loader.mjs src/main.ts` runs the
// TypeScript sources as they are. Each .ts module is compiled to JavaScript by esbuild once and kept
// in node_modules/.cache/ts-loader under the hash of its source; every later process reads it back.
// A relative `./x.js` that does not exist from a .ts module loads `./x.ts` (the client's sources).
// Node 24.13 and later run the hooks on the loading thread (module.registerHooks, which was not
// reliable before); Node 20 runs them on the loader thread of module.register. Worker threads
// register them again (src/ingest/row-thread-boot.mjs).
import module from 'node:module'
import { loadSync, resolveSync } from './ts-loader-hooks.mjs'

const [major, minor] = process.versions.node.split('.').map(Number)
const syncHooks = typeof module.registerHooks === 'function' && (major > 24 || (major === 24 && minor >= 13))

process.setSourceMapsEnabled(true)
if (syncHooks) module.registerHooks({ resolve: resolveSync, load: loadSync })
else module.register('./ts-loader-hooks.mjs', import.meta.url)
