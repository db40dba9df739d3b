import t from 'tap'
import { readFileSync } from 'node:fs'
import { eventSchemaModule } from '../../client/scripts/event-schema.ts'
import { KNOWN_KEYWORDS, parseIsoDateTime as clientParse, validateEvent as clientValidate } from '../../client/src/validate.ts'
import { plainJson } from '../../client/src/json.ts'
import { validateEvent as serviceValidate, toDetails } from '../../src/validation.ts'
import { inputProblems } from '../../src/domain/input-rules.ts'
import { parseIsoDateTime as serviceParse } from '../../src/domain/date-time.ts'
import { event as serviceSchema } from '../../schemas/event.ts'

// The client checks events against the service's own schema, with a small interpreter instead of
// Ajv: these tests hold the copy to the service's schema and the interpreter to the service's Ajv.

t.test('the client\'s copy of the event schema is the service\'s (npm run client:schema rewrites it)', async (t) => {
  t.equal(readFileSync(new URL('../../client/src/event-schema.ts', import.meta.url), 'utf8'), eventSchemaModule(), 'if not: npm run client:schema, then npm run build')
})

t.test('the schema uses only keywords the interpreter knows', async (t) => {
  const unknown: string[] = []
  const walk = (s: Record<string, unknown>, path: string) => {
    for (const [k, v] of Object.entries(s)) {
      if (!KNOWN_KEYWORDS.has(k)) unknown.push(`${path}/${k}`)
      if (k === 'properties') for (const [name, sub] of Object.entries(v as object)) walk(sub as Record<string, unknown>, `${path}/properties/${name}`)
      if (k === 'items') walk(v as Record<string, unknown>, `${path}/items`)
      if (k === 'oneOf') (v as Record<string, unknown>[]).forEach((sub, i) => walk(sub, `${path}/oneOf/${i}`))
    }
  }
  walk(serviceSchema as unknown as Record<string, unknown>, '')
  t.same(unknown, [])
})

/** The service's verdict on one event: input rules, then Ajv (src/ingest/steps/schema.ts). */
function serviceVerdict (event: unknown) {
  const input = inputProblems(event)
  if (input.length > 0) return input
  return serviceValidate(event) ? [] : toDetails(serviceValidate.errors)
}

function clientVerdict (event: unknown) {
  const problems: { path: (string | number)[]; message: string }[] = []
  const copy = plainJson(event, problems)
  return problems.length > 0 ? problems : clientValidate(copy)
}

const VALUES: unknown[] = [
  null, true, 0, -1, 1.5, 2 ** 53 - 1, 10_000_000_001, 4291747200000, 4291747199999, '', 'x', 'x'.repeat(121), 'x'.repeat(201), '😀'.repeat(120), '😀'.repeat(121),
  '2026-05-01T10:00:00Z', '2026-05-01 10:00', '2026-02-30T00:00:00Z', '1969-12-31T23:59:59Z', '2105-12-31T23:59:59+00:00', '2106-01-01T00:00:00Z', '2026-05-01T10:00:00+0530',
  'decision', 'thought', 'success', 'failed', 'minimal', 'huge', [], ['a'], [1], {}, { prompt: 'p' }, { prompt: 1 }, { context: [] }, { token: 'SOL', value: 1 }, { value: 1 },
  { token: '', value: 1 }, { output: 5 }, { output: -5 }, { output: 1.5 }, { inputBase: 10_000_000_001 }, '\ud800',
]
const FIELDS = ['agentId', 'timestamp', 'type', 'input', 'reasoning', 'toolsConsidered', 'toolExecuted', 'transaction', 'amount', 'outcome', 'durationMs', 'errorMessage', 'model', 'metadata', 'colour']
const METADATA = ['tokensBreakdown', 'traceId', 'spanId', 'parentSpanId', 'provider', 'sessionId', 'cwd', 'git', 'privacyLevel', 'tool', 'dedupKey', 'denial', 'anything']

t.test('the client accepts exactly what the service accepts, and names the same paths', async (t) => {
  const cases: unknown[] = []
  for (const field of FIELDS) for (const value of VALUES) cases.push({ agentId: 'a', [field]: value })
  for (const key of METADATA) for (const value of VALUES) cases.push({ agentId: 'a', metadata: { [key]: value } })
  for (const value of VALUES) cases.push({ agentId: 'a', metadata: { tokensBreakdown: { output: value } }, toolsConsidered: ['a', value] })
  let deep: unknown = 'leaf'
  for (let i = 0; i < 32; i++) deep = [deep]
  cases.push({ agentId: 'a', metadata: { deep } }, { agentId: 'a', metadata: { deeper: [deep] } })
  let disagreements = 0
  for (const event of cases) {
    const service = serviceVerdict(event)
    const client = clientVerdict(event)
    const same = (service.length === 0) === (client.length === 0) &&
      JSON.stringify(service.map((p) => p.path).sort()) === JSON.stringify(client.map((p) => p.path).sort())
    if (!same && disagreements++ < 10) t.fail(`${JSON.stringify(event).slice(0, 120)}: service ${JSON.stringify(service)}, client ${JSON.stringify(client)}`)
  }
  t.equal(disagreements, 0, `${cases.length} events, the same verdict and paths`)
})

t.test('ISO date-times are read as the service reads them', async (t) => {
  for (const s of ['2026-05-01T10:00:00Z', '2026-05-01t10:00:00.123456789z', '2026-05-01 10:00', '2026-05-01T10:00:00+05:30', '2026-05-01T10:00:00-0800',
    '2026-02-29T00:00:00Z', '2028-02-29T00:00:00Z', '1970-01-01T00:00:00+05:00', '2026-13-01T00:00:00Z', '2026-05-01', 'soon']) {
    t.same(clientParse(s), serviceParse(s), s)
  }
})
