import { parentPort } from 'node:worker_threads'
import { rowLines, type RowJob } from './row-thread.ts'

// Builds the lines of each job it is sent (src/services/row-thread.ts), in order; a job it cannot
// build is answered with the error, and the main thread builds it again itself.
const port = parentPort!
port.on('message', ({ id, job }: { id: number; job: RowJob }) => {
  try {
    port.postMessage({ id, lines: rowLines(job) })
  } catch (err) {
    port.postMessage({ id, error: err instanceof Error ? err.message : String(err) })
  }
})
port.postMessage('ready')
