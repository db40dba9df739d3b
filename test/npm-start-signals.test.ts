import t from 'tap'
import { signalStopsNpmStart } from './helpers/npm-start.ts'

// SIGINT is in npm-start-sigint.test.ts: each start takes most of a file's time budget.
t.test('SIGTERM to the pid of `npm start` shuts the service down gracefully, leaving no process and a free port', (t) => signalStopsNpmStart(t, 'SIGTERM'))
