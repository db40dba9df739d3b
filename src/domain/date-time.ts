// Event times: the ISO 8601 forms the API accepts, and the range the store can hold.

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?$/

/**
 * Event instants must lie in [1970-01-01T00:00:00Z, 2106-01-01T00:00:00Z): the hourly and daily
 * rollups count an event in its hour as ClickHouse's DateTime, which ends on 2106-02-07 (a later hour
 * would wrap round to the 1970s and 1980s without a word), and reads take the same range.
 */
const MIN_EVENT_TIME_MS = 0
const END_EVENT_TIME_MS = Date.UTC(2106, 0, 1)

/**
 * Parses an ISO 8601 date-time to unix milliseconds. A missing zone means UTC. Returns NaN for
 * anything that is not a real date, or whose instant (after its offset) is outside
 * [MIN_EVENT_TIME_MS, END_EVENT_TIME_MS).
 */
export function parseIsoDateTime (value: string): number {
  const ms = isoInstant(value)
  return isEventTime(ms) ? ms : NaN
}

/** True for an instant (unix ms) in [MIN_EVENT_TIME_MS, END_EVENT_TIME_MS). */
export function isEventTime (ms: number): boolean {
  return ms >= MIN_EVENT_TIME_MS && ms < END_EVENT_TIME_MS
}

/** The range of event times in words, for the messages that refuse an instant outside it. */
export const EVENT_TIME_RANGE = 'from 1970-01-01T00:00:00Z up to (not including) 2106-01-01T00:00:00Z'

/** True for a real ISO 8601 date-time whose instant lies outside the range: refused for its range, not its form. */
export function isIsoDateTimeOutOfRange (value: string): boolean {
  const ms = isoInstant(value)
  return !Number.isNaN(ms) && !isEventTime(ms)
}

/** The instant of a real ISO 8601 date-time in unix ms, whatever its year; NaN for anything else. */
function isoInstant (value: string): number {
  const m = ISO_DATE_TIME.exec(value)
  if (!m) return NaN
  let text = value.replace(' ', 'T')
  if (!/(?:[Zz]|[+-]\d{2}:?\d{2})$/.test(text)) text += 'Z'
  text = text.replace(/([+-]\d{2})(\d{2})$/, '$1:$2')
  const ms = Date.parse(text)
  if (Number.isNaN(ms) || Number(m[3]) > 31 || Number(m[2]) > 12) return NaN
  // Date.parse rolls 2026-02-30 over to March; compare the day back to refuse it.
  const check = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])))
  if (check.getUTCDate() !== Number(m[3])) return NaN
  return ms
}
