// The row thread's entry (src/ingest/row-thread.ts): worker threads do not inherit the parent's
// TypeScript loader, so it is registered here before the thread's module is loaded.
import { register } from 'tsx/esm/api'

register()
await import('./row-thread-worker.ts')
