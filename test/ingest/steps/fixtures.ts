import type { AgentRef } from '../../../src/storage/agents-repository.ts'
import type { IngestCaller, IngestItem, IngestRun, IngestVerdict } from '../../../src/ingest/steps/ingest-run.ts'
import { validationFailed } from '../../../src/http-error.ts'

/** Small fakes of what the ingestion steps are given, for their unit tests. */

export const unbound: IngestCaller = { userId: 'user-1', tier: 'free', burstPerMinute: null, agentId: null, source: { kind: 'api_key', keyId: 'key-1' } }

export function run (overrides: Partial<IngestRun> = {}): IngestRun {
  return { caller: unbound, source: 'events', invalid: validationFailed, refusalOf: () => null, receivedAt: Date.parse('2026-11-27T08:00:00Z'), rows: null, prices: null, ...overrides }
}

export function items (...events: unknown[]): IngestItem[] {
  return events.map((event, index) => ({ index, event, agent: null, eventId: '' }))
}

export const event = (agentId?: string, extra: Record<string, unknown> = {}) => ({ ...(agentId === undefined ? {} : { agentId }), type: 'decision', outcome: 'success', ...extra })

export function agent (id: string, extra: Partial<AgentRef> = {}): AgentRef {
  return { id, ownerId: 'user-1', snsName: null, displayName: id, deleted: false, framework: null, ...extra }
}

/** A verdict as a short word for comparing lists: 'pass', 'accepted', or the refusal's status and code. */
export function word (verdict: IngestVerdict): string {
  if (verdict === undefined) return 'pass'
  return verdict.kind === 'accepted' ? 'accepted' : `${verdict.error.statusCode} ${verdict.error.code}`
}

/** A promise the test settles itself. */
export function deferred<T> () {
  const settle = {} as { resolve: (value: T) => void; reject: (err: unknown) => void }
  const promise = new Promise<T>((resolve, reject) => Object.assign(settle, { resolve, reject }))
  return { promise, ...settle }
}
