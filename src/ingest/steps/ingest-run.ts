import type { EventSource } from '../../domain/event-row.ts'
import type { UserPriceTable } from '../../domain/pricing.ts'
import type { HttpError } from '../../http-error.ts'
import type { AgentRef } from '../../storage/agents-repository.ts'
import type { KeyIdentity } from '../../storage/keys-repository.ts'
import type { Tier } from '../../storage/users-repository.ts'
import type { ErrorDetail } from '../../validation.ts'
import type { RowBytes } from '../log/entry-codec.ts'
import type { Step, Verdict } from '../pipeline.ts'

// What the steps of the ingestion pipeline share: the request as they see it (IngestRun), each event
// on its way (IngestItem), and the acknowledgement an accepted event gets.

/** The spec's acknowledgement of an accepted event. */
export type EventAck = {
  id: string
  accepted: true
  agentId: string
  eventId: string
}

/**
 * Who is sending: a user with a tier, optionally bound to one agent, and through what. API keys are
 * the usual source; the dashboard's test event is ingested for a signed-in user with no key.
 */
export interface IngestCaller {
  userId: string
  tier: Tier
  burstPerMinute: number | null
  /** The only agent this caller may send for (a bound key, the test agent), or null for any of the user's. */
  agentId: string | null
  source: { kind: 'api_key'; keyId: string } | { kind: 'dashboard_test' } | { kind: 'dashboard' }
  /** A publishable key (a web page's): it may send only scores with source 'human', and their ids are its own. */
  publishable?: boolean
}

/**
 * The agent a caller's API key is bound to, or null (an unbound key, a publishable key, the
 * dashboard): what such a key writes is its agent's (its score ids, its span ids), never another's.
 */
export function boundAgentOf (caller: Pick<IngestCaller, 'agentId' | 'source' | 'publishable'>): string | null {
  return caller.source.kind === 'api_key' && !caller.publishable ? caller.agentId : null
}

export function callerOfKey (key: KeyIdentity): IngestCaller {
  const caller: IngestCaller = { userId: key.userId, tier: key.tier, burstPerMinute: key.burstPerMinute, agentId: key.agentId, source: { kind: 'api_key', keyId: key.keyId } }
  if (key.kind === 'publishable') caller.publishable = true
  return caller
}

/**
 * The body parser's refusal of item i of a batch, found while parsing it: its input-rule problems
 * (400), or 413 for an item larger than a body of its own may be. Null for an item it let through.
 */
export type RefusalOf = (i: number) => HttpError | null

/** The JSON text a batch's events were parsed from (by plain JSON.parse, unchanged since): its `key` array holds them. */
export type BatchText = { text: string; key: string }

/** How an entry point hands its events to the pipeline. */
export interface IngestRequest {
  caller: IngestCaller
  source: EventSource
  /** The refusal of an event that does not match the schema, given what is wrong with it. */
  invalid: (details: ErrorDetail[]) => HttpError
  refusalOf: RefusalOf
  /** The body's text, sent to the row thread instead of the events. */
  parsedFrom?: BatchText
}

/** What the steps of one request share. */
export interface IngestRun extends IngestRequest {
  /** When the request was received: the time of its event ids and of its rows. */
  receivedAt: number
  /** The lines the `row` step built, which the `log` step appends. */
  rows: RowBytes | null
  /** The caller's user's model prices, set by `prices`; null when the user has set none. */
  prices: UserPriceTable | null
}

/** One event on its way through the steps; what a step learns of it is written on it for the next ones. */
export interface IngestItem {
  /** Its position in the request. */
  readonly index: number
  /** As sent; an IncomingEvent once past `schema`. */
  readonly event: unknown
  /** Set by `resolve`. */
  agent: AgentRef | null
  /** Set by `row`. */
  eventId: string
}

export type IngestVerdict = Verdict<EventAck>

/** A step of the ingestion pipeline. */
export type IngestionStep = Step<IngestRun, IngestItem, EventAck>
