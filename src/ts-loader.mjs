// The service's TypeScript loader: `node --import ./src/ts-loader.mjs src/main.ts` runs the
// TypeScript sources as they are. Each .ts module is compiled to JavaScript by esbuild once and kept
// in node_modules/.cache/ts-loader under the hash of its source; every later process reads it back.
// A relative `./x.js` that does not exist from a .ts module loads `./x.ts` (the client's sources).
// Node 22.15 and later run the hook on the loading thread (module.registerHooks); Node 20 runs it on
// the loader thread of module.register. Worker threads register it again (src/ingest/row-thread-boot.mjs).
import module from 'node:module'
import { loadSync, resolveSync } from './ts-loader-hooks.mjs'

process.setSourceMapsEnabled(true)
if (typeof module.registerHooks === 'function') module.registerHooks({ resolve: resolveSync, load: loadSync })
else module.register('./ts-loader-hooks.mjs', import.meta.url)
