/** Lenient query parameters of the dashboard reads: values that do not fit fall back, never fail. */

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
