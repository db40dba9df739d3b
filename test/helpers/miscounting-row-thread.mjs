// A row thread that answers every job at once with one row fewer than it has events, for
// test/ingest/row-thread.test.ts.
import { parentPort } from 'node:worker_threads'

parentPort.on('message', ({ id, job }) => {
  const rows = job.events.length - 1
  parentPort.postMessage({ id, rows, bytes: new TextEncoder().encode(Array.from({ length: rows }, () => 'miscounted').join('\n')) })
})
parentPort.postMessage('ready')
