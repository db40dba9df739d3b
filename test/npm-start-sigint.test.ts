import t from 'tap'
import { signalStopsNpmStart } from './helpers/npm-start.ts'

t.test('SIGINT to the pid of `npm start` shuts the service down gracefully, leaving no process and a free port', (t) => signalStopsNpmStart(t, 'SIGINT'))
