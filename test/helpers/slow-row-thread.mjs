// A row thread that answers every job, one every 100 ms, with the line 'from the thread' for each of
// its events (a slow but working thread), for test/ingest/row-thread.test.ts.
import { parentPort } from 'node:worker_threads'

let next = Promise.resolve()
parentPort.on('message', ({ id, job }) => {
  const rows = job.events.length
  const bytes = new TextEncoder().encode(Array.from({ length: rows }, () => 'from the thread').join('\n'))
  next = next.then(() => new Promise((resolve) => setTimeout(resolve, 100))).then(() => parentPort.postMessage({ id, rows, bytes }))
})
parentPort.postMessage('ready')
