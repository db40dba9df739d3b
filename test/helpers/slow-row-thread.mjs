// A row thread that answers every job, one every 100 ms, with the line 'from the thread' (a slow
// but working thread), for test/services/row-thread.test.ts.
import { parentPort } from 'node:worker_threads'

let next = Promise.resolve()
parentPort.on('message', ({ id }) => {
  next = next.then(() => new Promise((resolve) => setTimeout(resolve, 100))).then(() => parentPort.postMessage({ id, rows: 1, bytes: new TextEncoder().encode('from the thread') }))
})
parentPort.postMessage('ready')
