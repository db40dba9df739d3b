import type { IncomingEvent } from '../../domain/event-row.ts'
import { agentDeleted, forbidden } from '../../http-error.ts'
import type { AgentResolver } from '../../cache/agent-resolver.ts'
import type { Resolution } from '../../storage/agents-repository.ts'
import type { IngestCaller, IngestionStep, IngestItem, IngestVerdict } from './ingest-run.ts'

type Agents = Pick<AgentResolver, 'resolve' | 'peek'>

/**
 * `resolve`: each event's agent, without waiting for those this process holds (the usual case); the
 * others are looked up one after the other. An event for an agent the caller may not send for, or a
 * deleted one, is refused.
 */
export function resolveStep (parts: { agents: Agents }): IngestionStep {
  const { agents } = parts
  return {
    name: 'resolve',
    run: ({ caller }, items) => {
      const held = heldResolutions(agents, caller, items)
      if (!held.includes(undefined)) return settleAgents(caller, items, held as Resolution[])
      return lookUpOthers(agents, caller, items, held).then((resolutions) => settleAgents(caller, items, resolutions))
    },
  }
}

/** The resolution of each item's agent reference if this process holds it, else undefined. */
function heldResolutions (agents: Agents, caller: IngestCaller, items: IngestItem[]): (Resolution | undefined)[] {
  // A batch names few agents: each reference is looked up once per request.
  const seen = new Map<string, Resolution | undefined>()
  return items.map((item) => {
    const ref = agentRef(caller, item)
    if (!seen.has(ref)) seen.set(ref, agents.peek(caller.userId, ref))
    return seen.get(ref)
  })
}

/** `held` with the resolutions this process did not hold looked up, one after the other. */
async function lookUpOthers (agents: Agents, caller: IngestCaller, items: IngestItem[], held: (Resolution | undefined)[]): Promise<Resolution[]> {
  const resolutions: Resolution[] = []
  for (const [i, item] of items.entries()) resolutions.push(held[i] ?? await agents.resolve(caller.userId, agentRef(caller, item)))
  return resolutions
}

/**
 * Each item's agent from the resolution of its reference (the caller's bound agent, else the
 * event's agentId, which `schema` made sure an unbound caller names), or its refusal.
 */
function settleAgents (caller: IngestCaller, items: IngestItem[], resolutions: Resolution[]): IngestVerdict[] {
  return items.map((item, i): IngestVerdict => {
    const resolution = resolutions[i]!
    if (resolution.kind === 'forbidden') return { kind: 'refused', error: forbidden(caller.agentId !== null ? 'key_agent_not_owned' : resolution.reason) }
    const ref = (item.event as IncomingEvent).agentId
    const agent = resolution.agent
    if (caller.agentId !== null && ref !== undefined && ref !== agent.id && ref !== agent.snsName && ref !== agent.displayName) {
      return { kind: 'refused', error: forbidden('key_bound_to_other_agent') }
    }
    if (resolution.kind === 'deleted') return { kind: 'refused', error: agentDeleted() }
    item.agent = agent
    return undefined
  })
}

/** The agent reference an item is sent for: the caller's bound agent, else the event's own. */
function agentRef (caller: IngestCaller, item: IngestItem): string {
  return caller.agentId ?? (item.event as IncomingEvent).agentId!
}
