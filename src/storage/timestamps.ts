/** A Postgres timestamp column (a Date from node-postgres, or null) as ISO 8601, or null. */
export function isoOrNull (value: unknown): string | null {
  return value == null ? null : new Date(value as string).toISOString()
}

/** A non-null Postgres timestamp column as ISO 8601. */
export function iso (value: unknown): string {
  return new Date(value as string).toISOString()
}

/** Unix milliseconds as ClickHouse returns them in JSON (a number or a numeric string) as ISO 8601. */
export function isoFromMs (ms: string | number): string {
  return new Date(Number(ms)).toISOString()
}

export { DAY_MS, utcDay } from '../domain/dashboard.ts'
