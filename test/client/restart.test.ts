import './built-client.ts'
import t from 'tap'
import type { ChildProcess } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { AgentTelemetry, type TelemetryError } from 'agent-telemetry-client'
import { enterpriseUserOf, exited, startService, waitHealthy, serviceSetup } from '../helpers/service-process.ts'
import { TEST_CLICKHOUSE_ENV, TEST_CLICKHOUSE_URL, randomId } from '../helpers/app.ts'
import { openClickHouse } from '../../src/storage/clickhouse-client.ts'

// The service in a process of its own, SIGKILLed while the client streams events and started again.
// A proxy between the client and the service kills the service at the worst moment for the client:
// just after it answered a batch (its events are in the service's log and its answer recorded under
// the batch's Idempotency-Key) and before the client got the answer, which is lost. The client holds
// its events through the outage and retries each batch under its key, so the batch whose answer was
// lost is answered from its record after the restart, and every event is stored, once. A client that
// sent a new key with each retry would store that batch twice.

const { dataDir, base: baseUrl, env } = await serviceSetup('client-restart', TEST_CLICKHOUSE_ENV)

let child: ChildProcess = startService(t, env)
await waitHealthy(child, baseUrl)

const { userId, secret } = await enterpriseUserOf(baseUrl, dataDir, 'client-restart')

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The proxy: passes each request on to the service. Once `killAfterNextAnswer` is called, the next
 * batch the service answers 207 is not relayed: the service is SIGKILLed first, then the client's
 * connection is cut. While the service is down, requests are cut as they come (a refused connection).
 */
let killing: ((key: string) => void) | undefined
const forwarded: { key: string; status: number; replayed: boolean }[] = []
const proxy = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', async () => {
    const key = String(req.headers['idempotency-key'])
    let answer: Response
    let body: string
    try {
      const headers = { authorization: String(req.headers.authorization), 'content-type': 'application/json', 'idempotency-key': key }
      answer = await fetch(`${baseUrl}${req.url}`, { method: 'POST', headers, body: Buffer.concat(chunks) })
      body = await answer.text()
    } catch {
      return req.socket.destroy()
    }
    forwarded.push({ key, status: answer.status, replayed: answer.headers.get('idempotent-replayed') === 'true' })
    if (killing && answer.status === 207) {
      const kill = killing
      killing = undefined
      const gone = exited(child)
      child.kill('SIGKILL')
      await gone
      req.socket.destroy()
      return kill(key)
    }
    res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers.get('idempotent-replayed') ? { 'idempotent-replayed': 'true' } : {}) }).end(body)
  })
})
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
t.teardown(() => { proxy.closeAllConnections(); proxy.close() })
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`
const killAfterNextAnswer = () => new Promise<string>((resolve) => { killing = resolve })

t.test('the service SIGKILLed after answering a batch, before the client got the answer: nothing lost, nothing twice', async (t) => {
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({
    apiKey: secret, baseUrl: proxyUrl, agentId: 'restart-agent', flushAt: 50, flushIntervalMs: 50, maxQueue: 200_000, maxRetries: 1000, retryMaxMs: 1000, requestTimeoutMs: 5000,
    onError: (e) => errors.push(e),
  })
  const marker = randomId('r-')
  let tracked = 0
  let streaming = true
  const stream = (async () => {
    // eslint-disable-next-line no-unmodified-loop-condition -- the test body ends it
    while (streaming) {
      for (let i = 0; i < 40; i++) client.track({ type: 'tool', toolExecuted: 'fetch', reasoning: `${marker}-${tracked++}`, metadata: { tokensBreakdown: { output: 10 } } })
      await sleep(20)
    }
  })()

  await sleep(1500)
  const lostKey = await killAfterNextAnswer()
  t.equal(child.signalCode, 'SIGKILL')
  const sentBeforeKill = client.stats().sent
  await sleep(500)
  child = startService(t, env)
  await waitHealthy(child, baseUrl)
  await sleep(1500)
  streaming = false
  await stream
  await client.shutdown(120_000)

  const stats = client.stats()
  t.ok(sentBeforeKill > 0, `events were sent before the kill (${sentBeforeKill})`)
  t.ok(stats.retries > 0, `batches were retried through the outage (${stats.retries})`)
  const again = forwarded.filter((f) => f.key === lostKey)
  t.same(again.map((f) => [f.status, f.replayed]), [[207, false], [207, true]], 'the batch whose answer was lost went again under its key and was answered from its record')
  t.equal(stats.replayed, 1, 'the client was told so')
  t.equal(stats.sent, tracked, `all ${tracked} acknowledged`)
  t.same(Object.entries(stats.dropped).filter(([, n]) => n > 0), [], 'nothing dropped')
  t.same(errors.filter((e) => e.reason !== 'retrying'), [])

  // Everything acknowledged is shipped to ClickHouse, then the process stops so the store can be read.
  const deadline = Date.now() + 60_000
  let backlog = -1
  while (Date.now() < deadline) {
    const res = await request(`${baseUrl}/health`)
    backlog = ((await res.body.json()) as { ingest: { backlogRows: number } }).ingest.backlogRows
    if (backlog === 0) break
    await sleep(100)
  }
  t.equal(backlog, 0)
  const stopped = exited(child)
  child.kill('SIGTERM')
  t.equal((await stopped).code, 0)

  const handle = openClickHouse({ url: TEST_CLICKHOUSE_URL, dataDir })
  t.teardown(() => handle.release())
  const rs = await handle.client.query({
    query: 'SELECT count() AS rows, uniqExact(reasoning) AS distinct FROM events WHERE user_id = {u:String} AND startsWith(reasoning, {m:String})',
    query_params: { u: userId, m: marker },
    format: 'JSONEachRow',
  })
  const [row] = await rs.json<{ rows: string; distinct: string }>()
  t.equal(Number(row?.distinct), tracked, `every one of ${tracked} events stored`)
  t.equal(Number(row?.rows), tracked, 'none twice')
})
