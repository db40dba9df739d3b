import t from 'tap'
import { AcceptedActivity } from '../../src/ingest/accepted-activity.ts'
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
