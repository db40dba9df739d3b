import t from 'tap'
import { Writable } from 'node:stream'
import Fastify from 'fastify'
import errors from '../../src/plugins/error-handler.ts'
import { IngestLogRefused } from '../../src/ingest/log/ingest-log.ts'
import { writesNotYetReadable } from '../../src/http-error.ts'

// A full disk or ingest log refuses every event, and a stalled ClickHouse every read: the refusals
// are answered one by one, and told in the log once every 10 s per reason, with how many it stands for.

const lines: Record<string, any>[] = []
const stream = new Writable({ write (chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
const app = Fastify({ logger: { level: 'info', stream } })
await app.register(errors)
app.get('/full', async () => { throw new IngestLogRefused('ingest_log_full') })
app.get('/unwritable', async () => { throw new IngestLogRefused('ingest_log_unavailable') })
app.get('/unreadable', async () => { throw writesNotYetReadable(1000) })
t.teardown(() => app.close())

t.test('fifty refusals of each reason: fifty 503s, one line each reason', async (t) => {
  for (let i = 0; i < 50; i++) {
    for (const url of ['/full', '/unwritable', '/unreadable']) {
      const res = await app.inject({ url })
      t.equal(res.statusCode, 503)
    }
  }
  const refusals = lines.filter((l) => String(l.msg).startsWith('request refused'))
  t.same(refusals.map((l) => l.reason).sort(), ['ingest_log_full', 'ingest_log_unavailable', 'writes_not_yet_readable'], 'one line per reason')
  t.ok(refusals.every((l) => l.level === 40 && l.alsoRefused === 0), 'the first of each, a warning')
})
