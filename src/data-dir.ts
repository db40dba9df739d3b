import { mkdirSync, statSync } from 'node:fs'
import type { FastifyBaseLogger } from 'fastify'

/**
 * Makes DATA_DIR ready at start: created 0700 when missing, since it holds the ingest log's event
 * payloads, the embedded engine's data, the signing key and the analysts' password. An existing
 * directory that its group or others can read or write is left as the operator made it, with one warn
 * line naming the path and the fix. Returns whether it was created.
 */
export function prepareDataDir (dir: string, log: Pick<FastifyBaseLogger, 'warn'>): boolean {
  const created = mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined
  if (created) return true
  const mode = statSync(dir).mode & 0o777
  if (mode & 0o077) {
    log.warn({ path: dir, mode: mode.toString(8).padStart(4, '0') },
      `DATA_DIR is readable or writable by other users of this machine (event payloads, keys): run chmod 700 ${dir}`)
  }
  return false
}
