import { parentPort } from 'node:worker_threads'
import { rowLines, withEvents, type RowJob } from './row-thread.ts'
import { encodeLines } from './log/entry-codec.ts'

// Builds the lines of each job it is sent (src/ingest/row-thread.ts), in order, and answers them
// in UTF-8 joined by newlines, as the ingest log stores them: their memory is moved to the main
// thread, not copied. A job sent as the text its events were parsed from is parsed here first. A
// job it cannot build is answered with the error, and the main thread builds it again itself.
const port = parentPort!
port.on('message', ({ id, job }: { id: number; job: RowJob }) => {
  try {
    const lines = rowLines(withEvents(job))
    const bytes = encodeLines(lines)
    port.postMessage({ id, rows: lines.length, bytes }, [bytes.buffer])
  } catch (err) {
    port.postMessage({ id, error: err instanceof Error ? err.message : String(err) })
  }
})
port.postMessage('ready')
