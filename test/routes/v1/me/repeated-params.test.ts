import t from 'tap'
import { buildTestApp, newUser } from '../../../helpers/app.ts'

// One rule for a query parameter given more than once, on every read under /v1/me
// (docs/api.md#dashboard-data-v1me): a repeatable one is a list; a lenient one (its value, when it
// does not fit, is its default) takes its default; any other is a 400 naming it, `must be given
// once`. Never the schema's own words about types (`must be string`).

const app = await buildTestApp(t)
const user = await newUser(app)

interface Param { name: string; in: string; schema: { type?: string | string[]; enum?: unknown[]; examples?: unknown[]; 'x-lenient'?: boolean } }
const doc = (await app.inject({ url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { parameters?: Param[] }>> }

/** A value the parameter takes, so that only its repetition is at fault. */
function valueOf (p: Param): string {
  if (p.schema.enum) return String(p.schema.enum[0])
  if (p.schema.examples) return String(p.schema.examples[0])
  return p.schema.type === 'boolean' ? 'true' : '1'
}

const TYPE_WORDS = /^must be (string|integer|number|boolean|array|object|null)\b/

t.test('a single-valued parameter of a /v1/me read given twice: its default or `must be given once`, never a type', async (t) => {
  let walked = 0
  for (const [template, item] of Object.entries(doc.paths)) {
    if (!template.startsWith('/v1/me') || !item.get) continue
    // A path parameter of no one's: the rule holds before the route looks it up.
    const path = template.replace(/\{[^}]+\}/g, 'x')
    for (const p of item.get.parameters ?? []) {
      if (p.in !== 'query') continue
      const types = [p.schema.type].flat()
      if (types.includes('array')) continue
      walked++
      const v = valueOf(p)
      // HEAD: the live tail would hold a GET open.
      const res = await app.inject({ method: 'HEAD', url: `${path}?${p.name}=${encodeURIComponent(v)}&${p.name}=${encodeURIComponent(v)}`, headers: user.auth })
      const name = `${path} ${p.name} twice`
      if (p.schema['x-lenient'] === true) {
        t.equal(res.statusCode, 200, `${name}: its default`)
        continue
      }
      t.equal(res.statusCode, 400, name)
      const get = await app.inject({ method: 'GET', url: `${path}?${p.name}=${encodeURIComponent(v)}&${p.name}=${encodeURIComponent(v)}`, headers: user.auth })
      const details = get.json().details as { path: string[]; message: string }[]
      t.notOk(details.some((d) => TYPE_WORDS.test(d.message)), `${name}: ${JSON.stringify(details)}`)
      t.same(details, [{ path: [p.name], message: 'must be given once' }], name)
    }
  }
  t.ok(walked >= 30, `${walked} parameters walked`)
})

t.test('the observed cases: limit and since twice are the default, cursor and days twice must be given once', async (t) => {
  const get = (url: string) => app.inject({ method: 'GET', url, headers: user.auth })
  for (const url of ['/v1/me/scores?limit=1&limit=2', '/v1/me/agents?limit=1&limit=2', '/v1/me/errors?since=1&since=2', '/v1/me/events?limit=1&limit=2']) {
    t.equal((await get(url)).statusCode, 200, url)
  }
  for (const [url, name] of [
    ['/v1/me/scores?cursor=a&cursor=b', 'cursor'], ['/v1/me/agents?cursor=a&cursor=b', 'cursor'], ['/v1/me/alerts?cursor=a&cursor=b', 'cursor'],
    ['/v1/me/alerts?limit=1&limit=2', 'limit'], ['/v1/me/spend-summary?days=1&days=2', 'days'],
  ] as const) {
    const res = await get(url)
    t.equal(res.statusCode, 400, url)
    t.same(res.json().details, [{ path: [name], message: 'must be given once' }], url)
  }
})
