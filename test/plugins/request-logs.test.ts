import t from 'tap'
import { Writable } from 'node:stream'
import { testConfig } from '../helpers/app.ts'

// Request lines appear only at LOG_LEVEL=debug, and at that level: a filter by level finds them there.
t.test('request lines are debug lines, shown at LOG_LEVEL=debug only', async (t) => {
  const { buildApp } = await import('../../src/app.ts')
  for (const level of ['debug', 'info'] as const) {
    const lines: Array<{ level: number; msg: string }> = []
    const stream = new Writable({ write (chunk, _enc, done) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); done() } })
    const app = await buildApp(testConfig({ LOG_LEVEL: level }), { logger: { level, stream } })
    t.teardown(() => app.close())
    await app.ready()
    const res = await app.inject({ method: 'GET', url: '/health' })
    t.ok([200, 503].includes(res.statusCode))
    const requestLines = lines.filter((l) => l.msg === 'incoming request' || l.msg === 'request completed')
    if (level === 'debug') t.same(requestLines.map((l) => [l.msg, l.level]), [['incoming request', 20], ['request completed', 20]])
    else t.same(requestLines, [], 'none at info')
    await app.close()
  }
})
