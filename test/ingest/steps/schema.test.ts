import t from 'tap'
import { schemaStep } from '../../../src/ingest/steps/schema.ts'
import { HttpError, validationFailed } from '../../../src/http-error.ts'
import { event, items, run, unbound, word } from './fixtures.ts'

const step = schemaStep()

t.test('schema: valid events pass; an invalid one is refused with the details of what is wrong', async (t) => {
  const verdicts = step.run(run(), items(event('a'), event('a', { type: 'nonsense' }), { agentId: 5, type: 'decision', outcome: 'success' }))
  t.same((verdicts as unknown[]).map((v) => word(v as never)), ['pass', '400 validation_failed', '400 validation_failed'])
  t.match((verdicts as { error: HttpError }[])[1]!.error.body(), { details: [{ path: ['type'] }] })
})

t.test("schema: a refusal is the run's own (a single event names the body)", async (t) => {
  const named = (details: unknown[]) => new HttpError(400, 'validation_failed', { message: 'the body is not valid', details: details as never })
  const [verdict] = step.run(run({ invalid: named }), items(event('a', { outcome: 'maybe' }))) as { error: HttpError }[]
  t.match(verdict!.error.body(), { message: 'the body is not valid', details: [{ path: ['outcome'] }] })
})

t.test('schema: an unbound caller must name the agent; a bound one need not', async (t) => {
  const [unboundVerdict] = step.run(run(), items(event())) as { error: HttpError }[]
  t.match(unboundVerdict!.error.body(), { error: 'validation_failed', details: [{ path: ['agentId'], message: /not bound/ }] })
  t.same(step.run(run({ caller: { ...unbound, agentId: 'agent-1' } }), items(event())), [undefined])
})

t.test("schema: the body parser's input-rule problems refuse the event before the schema is checked", async (t) => {
  const problems = [{ path: ['input'], message: 'is too deep' }]
  const verdicts = step.run(run({ refusalOf: (i) => (i === 1 ? validationFailed(problems) : null) }), items(event('a'), event('a', { type: 'nonsense' })))
  const refused = (verdicts as ({ error: HttpError } | undefined)[])[1]!
  t.same(refused.error.body(), { error: 'validation_failed', message: 'the body is not valid', details: problems }, 'only the input rule, not the schema')
  t.equal((verdicts as unknown[])[0], undefined)
})
