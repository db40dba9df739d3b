import type { ClickHouseClient } from '@clickhouse/client'
import { formatQueryParams, TupleParam } from '@clickhouse/client-common'

/** The longest SQL a read is sent as with its values written in; longer ones keep their parameters. */
const MAX_INLINED_LENGTH = 64 * 1024

/** A parameter placeholder of a query: `{name:Type}`. */
const PLACEHOLDER = /\{(\w+):([^{}]+)\}/g

/**
 * The query with each `{name:Type}` of its text (the service's own SQL, which has none inside a
 * string or a comment) replaced by the parameter's value as a literal cast to its type, written by
 * the client library's own formatter in the form the engine parses (strings quoted, with quotes and
 * backslashes escaped). Undefined when a value is not one that reads back the same so: strings
 * without a NUL character (the engine's binding would cut the SQL there), integers the type holds
 * (a cast would wrap -1 into a UInt32 where a parameter is refused), arrays and tuples of those.
 * Such a query keeps its parameters.
 */
export function inlineParams (query: string, params: Record<string, unknown>): string | undefined {
  let writable = true
  const sql = query.replace(PLACEHOLDER, (_, name: string, type: string) => {
    if (!(name in params) || params[name] === undefined) throw new Error(`query parameter ${name} is not set`)
    const value = params[name]
    if (!readsBackAs(value, type)) writable = false
    return `CAST(${formatQueryParams({ value: ownTuples(value), wrapStringInQuotes: true, printNullAsKeyword: true })} AS ${type})`
  })
  return writable ? sql : undefined
}

function readsBackAs (value: unknown, type: string): boolean {
  if (typeof value === 'string') return !value.includes('\u0000')
  if (typeof value === 'number') return Number.isSafeInteger(value) && (value >= 0 || !type.startsWith('UInt'))
  if (Array.isArray(value)) return value.every((v) => (typeof v === 'string' || isTuple(v)) && readsBackAs(v, type))
  if (isTuple(value)) return value.values.every((v) => typeof v === 'string' && readsBackAs(v, type))
  return false
}

/** Tuples as the formatter's own class: @clickhouse/client bundles another copy of it, which the formatter would not recognise. */
function ownTuples (value: unknown): unknown {
  if (Array.isArray(value)) return value.map(ownTuples)
  if (isTuple(value)) return new TupleParam(value.values.map(ownTuples))
  return value
}

function isTuple (value: unknown): value is { values: unknown[] } {
  return value !== null && typeof value === 'object' && 'values' in value && Array.isArray(value.values)
}

/** One client over several sessions of the embedded engine (spreadReads). */
export interface SpreadClient {
  client: ClickHouseClient
  /** Runs work that the engine runs on the first session (its raw insert), counted as that session's load. */
  onFirst<T>(work: () => Promise<T>): Promise<T>
}

/** Calls of the client that run on the first session: counted as its load, so reads go round them. */
const ON_FIRST = new Set<PropertyKey>(['insert', 'command', 'exec'])

/**
 * One client over several sessions of the embedded engine, for reads. The engine's Node binding runs
 * one query at a time per session, and one query with parameters at a time in the whole process (it
 * binds them process-wide while the query runs). So the reads of one request (the agent profile makes
 * three) and of requests at once would wait on each other while the engine keeps one core busy: the
 * profile's reads took 38 ms one after another at 10 million events, 28 ms side by side. Each
 * `query` goes to the least busy session, its parameters written into the SQL (`inlineParams`);
 * everything else (commands, inserts) goes to the first session's client, and `close` closes them
 * all. Inserts and commands count as the first session's load while they run, as does the raw insert
 * (`onFirst`), so a read issued meanwhile goes to another session instead of queueing behind a block
 * being written.
 */
export function spreadReads (clients: ClickHouseClient[]): SpreadClient {
  const [first] = clients
  if (!first) throw new Error('spreadReads needs a client')
  const busy = clients.map(() => 0)
  /** Runs work on session i, counted as its load while it runs. */
  const onSession = async <T>(i: number, work: () => Promise<T>): Promise<T> => {
    busy[i]!++
    try {
      return await work()
    } finally {
      busy[i]!--
    }
  }
  const onFirst = <T>(work: () => Promise<T>) => onSession(0, work)
  const query: ClickHouseClient['query'] = (async (params: Parameters<ClickHouseClient['query']>[0]) => {
    const inlined = params.query_params ? inlineParams(params.query, params.query_params) : params.query
    // A query whose values would make it longer than the engine parses (max_query_size, 256 KiB; a
    // durability check's thousands of ids), or that keeps its parameters, goes to the first session.
    const keepsParams = inlined === undefined || inlined.length > MAX_INLINED_LENGTH
    const i = keepsParams ? 0 : busy.indexOf(Math.min(...busy))
    return onSession(i, () => clients[i]!.query(keepsParams ? params : { ...params, query: inlined, query_params: undefined }))
  }) as ClickHouseClient['query']
  const close = async () => { await Promise.all(clients.map((c) => c.close())) }
  const client = new Proxy(first, {
    get (target, prop) {
      if (prop === 'query') return query
      if (prop === 'close') return close
      const value = Reflect.get(target, prop, target)
      if (typeof value !== 'function') return value
      if (ON_FIRST.has(prop)) return (...args: unknown[]) => onFirst(() => value.apply(target, args))
      return value.bind(target)
    },
  })
  return { client, onFirst }
}
