// A row thread that starts and takes jobs but never answers one (a stuck thread), for
// test/ingest/row-thread.test.ts.
import { parentPort } from 'node:worker_threads'

parentPort.on('message', () => {})
parentPort.postMessage('ready')
