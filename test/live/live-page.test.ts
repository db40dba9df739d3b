import t from 'tap'
// @ts-expect-error the dashboard is plain JavaScript without types
import { reconnectDelay } from '../../ui/js/pages/live.js'

// The live page reconnects after a failure, waiting longer each time in a row, never forever-fast and
// never longer than 30 s (the status line says when the next attempt is).
t.test('the live page backs off between failed reconnects, up to 30 s', async (t) => {
  const waits = [1, 2, 3, 4, 5, 6, 20].map((n) => reconnectDelay(n) as number)
  t.same(waits, [2000, 4000, 8000, 16000, 30000, 30000, 30000])
})
