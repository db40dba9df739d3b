import { randomBytes, createHash, timingSafeEqual } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** The analysts' user name on the SQL port (as in a ClickHouse server's users.xml). */
export const ANALYST_USER = 'analyst'

export interface AnalystPassword {
  password: string
  /** The file holding a generated password; undefined when ANALYST_PASSWORD is set. */
  file: string | undefined
}

/**
 * ANALYST_PASSWORD when set; otherwise the password generated on first start into
 * DATA_DIR/analyst-password (mode 0600) and read back on every later start.
 */
export function loadAnalystPassword (dataDir: string, configured: string | undefined): AnalystPassword {
  if (configured) return { password: configured, file: undefined }
  const file = join(dataDir, 'analyst-password')
  mkdirSync(dataDir, { recursive: true })
  try {
    writeFileSync(file, `${randomBytes(18).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    // Written on an earlier start (or by another process just now): use it.
    if ((err as { code?: string }).code !== 'EEXIST') throw err
  }
  return { password: readFileSync(file, 'utf8').trim(), file }
}

/** Compares a presented password with the expected one in constant time. */
export function passwordMatches (expected: string, presented: string): boolean {
  const a = createHash('sha256').update(expected).digest()
  const b = createHash('sha256').update(presented).digest()
  return timingSafeEqual(a, b)
}
