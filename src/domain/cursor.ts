/**
 * Opaque paging cursors of the dashboard lists. A cursor names the list it belongs to, the instant
 * the walk began (`asOf`: later pages read the data as it stood then, so rows that arrive during a
 * walk neither shift it nor appear in it) and the sort key of the last row handed out (the next page
 * starts strictly after it). Sort keys end in a unique id, so no row is handed out twice and none is
 * skipped.
 */

export type CursorList = 'events' | 'sessions' | 'traces' | 'alerts' | 'agents' | 'deliveries' | 'scores'

/** Where a page starts: the walk's instant, and the sort key of the row before it (none on page one). */
export interface PageStart {
  asOf: number
  after: { ms: number; id: string } | null
}

/** One page of a list and the cursor of the next one (null when this page is the last). */
export interface Page<T> {
  items: T[]
  nextCursor: string | null
}

const MAX_CURSOR_CHARS = 512

/**
 * Lists whose rows are keyed by any id a caller sent (a session or trace id may hold any character
 * ingestion takes, a NUL included). Every other list's ids are the service's own (a cuid, `evt_`,
 * `msg_`, a score's row id), which never hold a control character: a cursor whose id does was not
 * handed out by that list, and must not reach its store (Postgres refuses a NUL as text).
 */
const CALLER_KEYED: readonly CursorList[] = ['sessions', 'traces']

export function encodeCursor (list: CursorList, asOf: number, after: { ms: number; id: string }): string {
  return Buffer.from(JSON.stringify([list, asOf, after.ms, after.id])).toString('base64url')
}

/**
 * The start of a page: a fresh walk at `now` when there is no cursor, the cursor's position
 * otherwise; null when the cursor is not one this list handed out.
 */
export function pageStart (list: CursorList, cursor: string | undefined, now: number): PageStart | null {
  if (cursor === undefined || cursor === '') return { asOf: now, after: null }
  if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    return null
  }
  if (!Array.isArray(value) || value.length !== 4) return null
  const [name, asOf, ms, id] = value as unknown[]
  if (name !== list || !isInstant(asOf) || !isInstant(ms) || typeof id !== 'string' || id.length > 256) return null
  if (!CALLER_KEYED.includes(list) && /\p{Cc}/u.test(id)) return null
  return { asOf, after: { ms, id } }
}

/**
 * The page out of `limit + 1` rows fetched in order: the first `limit`, and a cursor after the last
 * of them when there was one more.
 */
export function pageOf<T> (list: CursorList, asOf: number, rows: T[], limit: number, keyOf: (row: T) => { ms: number; id: string }): Page<T> {
  if (rows.length <= limit) return { items: rows, nextCursor: null }
  const items = rows.slice(0, limit)
  return { items, nextCursor: encodeCursor(list, asOf, keyOf(items[items.length - 1]!)) }
}

function isInstant (v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}
