import t from 'tap'
import { openTestClickHouse } from '../helpers/app.ts'

// Embedded or server (npm run test:server), every query of the service's client runs without the
// engine's expression compilation, which cost a read 30-40 ms the third time it met an expression.
t.test('the service\'s queries run with expression compilation off', async (t) => {
  const handle = openTestClickHouse()
  t.teardown(() => handle.release())
  const rs = await handle.client.query({
    query: `SELECT getSetting('compile_expressions') AS e, getSetting('compile_aggregate_expressions') AS a,
              getSetting('compile_sort_description') AS s`,
    format: 'JSONEachRow',
  })
  t.same(await rs.json(), [{ e: false, a: false, s: false }])
})
