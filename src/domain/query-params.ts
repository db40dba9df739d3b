/** Query parameters of the dashboard reads: the lenient ones fall back, never fail; the rule for a repeated one. */
import type { ErrorDetail } from '../validation.ts'

/** `since` windows accepted by dashboard reads, in milliseconds (`all` is no bound). */
export const SINCE_WINDOWS: Record<string, number | null> = { '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000, all: null }

/**
 * The lower time bound for a `since` value; an unknown value falls back to `fallback`. Only the
 * table's own keys count: `__proto__` or `constructor` would otherwise find Object.prototype's.
 */
export function sinceBound (since: unknown, now: number, fallback: keyof typeof SINCE_WINDOWS = 'all'): number {
  const key = typeof since === 'string' && Object.hasOwn(SINCE_WINDOWS, since) ? since : fallback
  const window = SINCE_WINDOWS[key]
  return window == null ? 0 : now - window
}

/** Clamps a query value to an integer in [min, max]; anything not a number gives the default. */
export function clampInt (value: unknown, min: number, max: number, fallback: number): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN
  if (!Number.isFinite(n)) return fallback
  return Math.min(max, Math.max(min, Math.trunc(n)))
}

/**
 * The one rule for a query parameter given more than once (a repeated one is an array in the parsed
 * query), read from the route's querystring schema: one whose schema takes an array repeats (a list
 * of its values); a lenient one (`lenient`: a value it cannot read is its default) is given its
 * default, as for any value it cannot read: it is in `defaulted`, for the caller to drop; any other
 * is a problem, `must be given once`. Parameters the schema does not name are left alone (unknown
 * ones are ignored; `meta.*` and `score.*` are the search's to check).
 */
export function repeatedParams (
  properties: Record<string, unknown>,
  query: Record<string, unknown>,
  lenient: (schema: Record<string, unknown>) => boolean,
): { defaulted: string[]; problems: ErrorDetail[] } {
  const defaulted: string[] = []
  const problems: ErrorDetail[] = []
  for (const name of Object.keys(query)) {
    if (!Array.isArray(query[name]) || !Object.hasOwn(properties, name)) continue
    const schema = properties[name] as Record<string, unknown>
    if ([schema.type].flat().includes('array')) continue
    if (lenient(schema)) defaulted.push(name)
    else problems.push({ path: [name], message: 'must be given once' })
  }
  return { defaulted, problems }
}
