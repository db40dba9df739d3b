import t from 'tap'
import type { FastifyBaseLogger } from 'fastify'
import { AcceptedActivity } from '../../src/ingest/accepted-activity.ts'
import { ActivityRecorder } from '../../src/ingest/activity-recorder.ts'
import type { AgentsRepository } from '../../src/storage/agents-repository.ts'
import type { KeysRepository } from '../../src/storage/keys-repository.ts'
import type { UsersRepository } from '../../src/storage/users-repository.ts'
import { agent, event, items, unbound } from './steps/fixtures.ts'

t.test('accepted events record the key, the events, each agent seen and each agent made active', async (t) => {
  const calls: unknown[][] = []
  const active: string[] = []
  const recorder = {
    keyUsed: (...args: unknown[]) => { calls.push(['keyUsed', ...args]) },
    eventsAccepted: (...args: unknown[]) => { calls.push(['eventsAccepted', ...args]) },
    agentSeen: (...args: unknown[]) => { calls.push(['agentSeen', ...args]) },
  }
  const accepted = new AcceptedActivity(recorder, (userId, agentId) => active.push(`${userId}/${agentId}`), () => 7)
  const list = items(event('a', { metadata: { tool: 'claude-code' } }), event('a'), event('b', { metadata: { tool: 'cursor' } }))
  list[0]!.agent = agent('agt-a')
  list[1]!.agent = agent('agt-a')
  list[2]!.agent = agent('agt-b', { framework: 'langgraph' })
  accepted.accepted(unbound, list)
  t.same(calls, [
    ['keyUsed', 'key-1', 7],
    ['eventsAccepted', 'user-1', 7, 3],
    ['agentSeen', 'agt-a', 7, 'claude-code'],
    ['agentSeen', 'agt-a', 7, null],
    ['agentSeen', 'agt-b', 7, null],
  ], "the framework back-filled from the event's tool only for an agent without one")
  t.same(active, ['user-1/agt-a', 'user-1/agt-b'], 'once per run of events of one agent')

  calls.length = 0
  accepted.accepted({ ...unbound, source: { kind: 'dashboard_test' } }, [list[2]!])
  t.same(calls.map((c) => c[0]), ['eventsAccepted', 'agentSeen'], 'no key for the dashboard test event')
})

t.test("the recorder counts each event in its own calendar month (UTC), on either side of a month's end", async (t) => {
  const written: Map<string, Map<string, number>>[] = []
  const none = async () => {}
  const recorder = new ActivityRecorder(
    { touch: none } as unknown as KeysRepository,
    { recordActivity: none } as unknown as AgentsRepository,
    { addUsage: async (usage: Map<string, Map<string, number>>) => { written.push(usage) } } as unknown as UsersRepository,
    { warn: () => {} } as unknown as FastifyBaseLogger,
  )
  const lastOfNovember = Date.parse('2026-11-30T23:59:59.999Z')
  recorder.eventsAccepted('user-1', lastOfNovember, 1)
  recorder.eventsAccepted('user-1', lastOfNovember + 1, 2)
  recorder.eventsAccepted('user-1', lastOfNovember, 4)
  recorder.eventsAccepted('user-2', Date.parse('2027-01-01T00:00:00.000Z') - 1, 8)
  recorder.eventsAccepted('user-2', Date.parse('2026-11-01T00:00:00.000Z'), 16)
  recorder.eventsAccepted('user-2', Date.parse('2026-11-01T00:00:00.000Z') - 1, 32)
  await recorder.flush()
  t.same(written.map((usage) => [...usage].map(([user, byMonth]) => [user, Object.fromEntries(byMonth)])), [[
    ['user-1', { '2026-11-01': 5, '2026-12-01': 2 }],
    ['user-2', { '2026-12-01': 8, '2026-11-01': 16, '2026-10-01': 32 }],
  ]])
})
