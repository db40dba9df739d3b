// The row thread's entry (src/ingest/row-thread.ts): a worker thread does not inherit the parent's
// TypeScript loader, so it registers it (src/ts-loader.mjs) before the thread's module is loaded.
import '../ts-loader.mjs'

await import('./row-thread-worker.ts')
