import { randomBytes, createHash, timingSafeEqual } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { StartupError } from '../startup-failure.ts'
import { makeDirs } from '../data-dir.ts'

/** The analysts' user name on the SQL port (as in a ClickHouse server's users.xml). */
export const ANALYST_USER = 'analyst'

/** Shortest analyst password (ANALYST_PASSWORD's schema says the same; a generated one has 24 characters). */
export const MIN_PASSWORD_LENGTH = 16

export interface AnalystPassword {
  password: string
  /** The file holding a generated password; undefined when ANALYST_PASSWORD is set. */
  file: string | undefined
}

/**
 * ANALYST_PASSWORD when set; otherwise the password generated on first start into
 * DATA_DIR/analyst-password (mode 0600) and read back on every later start. A file holding a password
 * shorter than MIN_PASSWORD_LENGTH (edited by hand: a generated one is longer) stops start-up, rather
 * than let the port open with a weak password or replace a password analysts were given.
 */
export function loadAnalystPassword (dataDir: string, configured: string | undefined): AnalystPassword {
  if (configured) return { password: configured, file: undefined }
  const file = join(dataDir, 'analyst-password')
  makeDirs(dataDir)
  try {
    writeFileSync(file, `${randomBytes(18).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    // Written on an earlier start (or by another process just now): use it.
    if ((err as { code?: string }).code !== 'EEXIST') throw err
  }
  const password = readFileSync(file, 'utf8').trim()
  if (password.length < MIN_PASSWORD_LENGTH) {
    throw new StartupError(`${file} holds an analyst password shorter than ${MIN_PASSWORD_LENGTH} characters: ` +
      'delete the file to have a new one generated on start, or set ANALYST_PASSWORD (at least 16 characters)')
  }
  return { password, file }
}

/** Compares a presented password with the expected one in constant time. */
export function passwordMatches (expected: string, presented: string): boolean {
  const a = createHash('sha256').update(expected).digest()
  const b = createHash('sha256').update(presented).digest()
  return timingSafeEqual(a, b)
}
