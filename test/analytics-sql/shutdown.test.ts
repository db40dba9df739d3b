import t from 'tap'
import { createClient, ClickHouseError, ClickHouseLogLevel } from '@clickhouse/client'
import { buildTestApp, TEST_CLICKHOUSE_URL } from '../helpers/app.ts'

// An analyst's query may be allowed minutes; shutdown may take at most 30 s. Closing the service
// cancels the port's running queries, as a ClickHouse server does when it stops, and the analyst is
// told why. Before, the close waited for the query, the 30 s shutdown timer fired, and the exit
// itself hung while the engine computed on.
if (TEST_CLICKHOUSE_URL) {
  t.plan(0, 'the analysts\' SQL port runs on the embedded engine only; skipped in server mode')
} else {
  const PASSWORD = 'analyst-shutdown-password'
  const app = await buildTestApp(t, {
    ANALYTICS_PORT: '0',
    ANALYST_PASSWORD: PASSWORD,
    ANALYTICS_MAX_EXECUTION_SECONDS: '600',
  })
  const port = await app.analyticsSql!.listen()
  const client = createClient({ url: `http://127.0.0.1:${port}`, username: 'analyst', password: PASSWORD, request_timeout: 120_000, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => client.close())

  t.test('closing the service cancels a long analyst query; the analyst gets a 503 saying why', async (t) => {
    // Minutes of work for the engine, in blocks: it checks for a cancel between them.
    const long = client.query({ query: 'SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 0', format: 'JSONEachRow' })
      .then(async (rs) => rs.json(), (err: unknown) => err)
    // The same through plain HTTP, for the status.
    const plain = fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`analyst:${PASSWORD}`).toString('base64')}` },
      body: 'SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 1',
    }).then(async (res) => ({ status: res.status, body: await res.text() }))
    while (app.analyticsSql!.running() < 2) await new Promise((resolve) => setTimeout(resolve, 20))
    await new Promise((resolve) => setTimeout(resolve, 300))
    const closed = await Promise.race([
      app.close().then(() => 'closed'),
      new Promise((resolve) => setTimeout(() => resolve('still closing after 20 s'), 20_000).unref()),
    ])
    t.equal(closed, 'closed', 'the close does not wait for the query to end on its own')
    const answer = await long
    t.type(answer, ClickHouseError, 'the query was answered with an error, not a result')
    t.match(answer, { type: 'QUERY_WAS_CANCELLED', message: /the service is shutting down/ })
    t.match(await plain, { status: 503, body: /QUERY_WAS_CANCELLED/ })
    t.equal(app.analyticsSql!.running(), 0)
  })
}
