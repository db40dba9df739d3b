import t from 'tap'
import { buildTestApp, newUser, randomId, shipped } from '../helpers/app.ts'

// Numbers in metadata are compared as text; the search (ClickHouse's metadata_flat) and the live
// tail (src/domain/live-events.ts, in memory) must see the same text for the same event.
const app = await buildTestApp(t, { REDIS_PREFIX: `test:${randomId()}:`, LIVE_HEARTBEAT_MS: '60000' })
await app.listen({ port: 0, host: '127.0.0.1' })
const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`

/** JSON literals as a client sends them, and texts a filter may try for each. */
const cases: { literal: string; texts: string[] }[] = [
  { literal: '1e20', texts: ['1e20', '1e+20', '100000000000000000000'] },
  { literal: '1e21', texts: ['1e21', '1e+21', '1000000000000000000000'] },
  { literal: '1.7976931348623157e308', texts: ['1.7976931348623157e308', '1.7976931348623157e+308'] },
  { literal: '5e-324', texts: ['5e-324', '4.9406564584124654e-324'] },
  { literal: '0.30000000000000004', texts: ['0.30000000000000004', '0.3'] },
  { literal: '-1.5', texts: ['-1.5', '-1.50'] },
  { literal: '9007199254740991', texts: ['9007199254740991', '9.007199254740991e15'] },
  // -2^63, which JSON.stringify writes as -9223372036854776000, below the 64-bit integers, like 1e20.
  { literal: '-9.223372036854776e18', texts: ['-9223372036854776000', '-9.223372036854776e18'] },
]

/**
 * Whether a stream with these filters gets the number's event: `send` posts it and then a marker
 * that the filters match too, so the stream is read up to the marker.
 */
async function streamMatches (user: { auth: Record<string, string> }, query: string, send: () => Promise<void>): Promise<boolean> {
  const controller = new AbortController()
  const res = await fetch(`${base}/v1/me/events/stream?${query}`, { headers: user.auth, signal: controller.signal })
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  let sent = false
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) throw new Error('the stream ended')
      text += decoder.decode(value, { stream: true })
      if (!sent && text.includes(': ready')) {
        sent = true
        await send()
      }
      // [^\n], not `.`: a data line may hold U+2028, which `.` does not cross (SSE breaks lines at \r and \n only).
      if (/^data: [^\n]*"marker"/m.test(text)) return /^data: [^\n]*"number"/m.test(text)
    }
  } finally {
    controller.abort()
  }
}

t.test('a number in metadata matches the same texts in the search and on the stream', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const post = async (raw: string) => {
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, payload: raw })
    t.equal(res.statusCode, 202, raw)
  }
  let matched = 0
  for (const [i, c] of cases.entries()) {
    for (const [j, text] of c.texts.entries()) {
      const mark = `${i}-${j}`
      const query = `meta.case=${mark}&meta.n.v=${encodeURIComponent(text)}`
      const onStream = await streamMatches(user, `${query}&meta.n.v=marker`, async () => {
        await post(`{"agentId":"n","reasoning":"number","metadata":{"case":"${mark}","n":{"v":${c.literal}}}}`)
        await post(`{"agentId":"n","reasoning":"marker","metadata":{"case":"${mark}","n":{"v":"marker"}}}`)
      })
      await shipped(app)
      const found = await app.inject({ url: `/v1/me/events?${query}`, headers: user.auth })
      t.equal(found.statusCode, 200)
      const inSearch = found.json().events.length > 0
      if (inSearch) matched++
      t.equal(onStream, inSearch, `${c.literal} as ${text}: the stream agrees with the search (${inSearch ? 'match' : 'no match'})`)
    }
  }
  t.equal(matched, cases.length - 2, 'each number but 1e20 and -2^63 is found by one text')
})

t.test('an array in input is searched as the engine writes its JSON text, on the stream as in the search', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const post = async (raw: string) => {
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, payload: raw })
    t.equal(res.statusCode, 202, raw)
  }
  // JSON literals of input arrays, and q terms for each with whether the engine's text holds them.
  const arrays: { literal: string; texts: [string, boolean][] }[] = [
    { literal: '[1e21]', texts: [['1e21', true], ['1e+21', false]] },
    { literal: '["x\\u2028y"]', texts: [['x\\u2028y', true]] }, // the engine escapes U+2028, JSON.stringify does not
    { literal: '[{"k":1.50}]', texts: [['{"k":1.5}', true], ['1.50', false]] },
    { literal: '["C:\\\\dir"]', texts: [['c:\\\\dir', true], ['c:\\dir', false]] },
    { literal: '[true,null,"café"]', texts: [['true,null', true], ['"café"]', true]] },
  ]
  for (const [i, c] of arrays.entries()) {
    for (const [j, [text, held]] of c.texts.entries()) {
      const mark = `a${i}-${j}`
      // q holds the text as a phrase (its quotes doubled would end it: these texts hold none but the last).
      const term = text.includes('"') ? text : `"${text}"`
      const query = `meta.case=${mark}&q=${encodeURIComponent(term)}`
      const onStream = await streamMatches(user, query, async () => {
        await post(`{"agentId":"n","reasoning":"number","input":{"a":${c.literal}},"metadata":{"case":"${mark}"}}`)
        await post(`{"agentId":"n","reasoning":${JSON.stringify(`marker ${text}`)},"metadata":{"case":"${mark}","kind":"marker"}}`)
      })
      await shipped(app)
      const found = await app.inject({ url: `/v1/me/events?${query}`, headers: user.auth })
      t.equal(found.statusCode, 200)
      const inSearch = found.json().events.some((e: { reasoning: string }) => e.reasoning === 'number')
      t.equal(inSearch, held, `${c.literal}, q=${term}: ${held ? 'found' : 'not found'} by the search`)
      t.equal(onStream, inSearch, `${c.literal}, q=${term}: the stream agrees with the search`)
    }
  }
})
