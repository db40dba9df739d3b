import t from 'tap'
import { resolveStep } from '../../../src/ingest/steps/resolve.ts'
import type { Resolution } from '../../../src/storage/agents-repository.ts'
import type { HttpError } from '../../../src/http-error.ts'
import { agent, event, items, run, unbound, word } from './fixtures.ts'

/** Agents by reference; `held` are those this process holds (peek answers them), the others are looked up. */
function agents (known: Record<string, Resolution>, held: string[] = Object.keys(known)) {
  const lookedUp: string[] = []
  return {
    lookedUp,
    fake: {
      peek: (_owner: string, ref: string) => (held.includes(ref) ? known[ref] : undefined),
      resolve: async (_owner: string, ref: string) => { lookedUp.push(ref); return known[ref]! },
    },
  }
}

t.test('resolve: agents this process holds settle without a promise; each item gets its agent', async (t) => {
  const a = agent('agt-a')
  const { fake, lookedUp } = agents({ a: { kind: 'ok', agent: a, created: false } })
  const list = items(event('a'), event('a'))
  const verdicts = resolveStep({ agents: fake }).run(run(), list)
  t.notOk(verdicts instanceof Promise)
  t.same(verdicts, [undefined, undefined])
  t.same(list.map((i) => i.agent?.id), ['agt-a', 'agt-a'])
  t.same(lookedUp, [])
})

t.test('resolve: the others are looked up one after the other; deleted and foreign agents are refused', async (t) => {
  const { fake, lookedUp } = agents({
    a: { kind: 'ok', agent: agent('agt-a'), created: true },
    gone: { kind: 'deleted', agent: agent('agt-gone', { deleted: true }) },
    theirs: { kind: 'forbidden', reason: 'agent_not_owned' },
  }, ['a'])
  const verdicts = await resolveStep({ agents: fake }).run(run(), items(event('a'), event('gone'), event('theirs'), event('gone')))
  t.same(verdicts.map(word), ['pass', '410 agent_deleted', '403 forbidden', '410 agent_deleted'])
  t.match((verdicts[2] as { error: HttpError }).error.body(), { reason: 'agent_not_owned' })
  t.same(lookedUp, ['gone', 'theirs', 'gone'], 'each event whose agent is not held, in order (the resolver caches)')
})

t.test('resolve: a bound caller sends for its agent; naming another is refused', async (t) => {
  const bound = { ...unbound, agentId: 'agt-b' }
  const { fake } = agents({ 'agt-b': { kind: 'ok', agent: agent('agt-b', { snsName: 'b.sns', displayName: 'Bee' }), created: false } })
  const verdicts = resolveStep({ agents: fake }).run(run({ caller: bound }), items(event(), event('b.sns'), event('Bee'), event('agt-b'), event('other')))
  t.same((verdicts as never[]).map(word), ['pass', 'pass', 'pass', 'pass', '403 forbidden'])
  t.match((verdicts as { error: HttpError }[])[4]!.error.body(), { reason: 'key_bound_to_other_agent' })
  const notOwned = agents({ 'agt-b': { kind: 'forbidden', reason: 'agent_not_owned' } }).fake
  const [refused] = resolveStep({ agents: notOwned }).run(run({ caller: bound }), items(event())) as { error: HttpError }[]
  t.match(refused!.error.body(), { error: 'forbidden', reason: 'key_agent_not_owned' })
})
