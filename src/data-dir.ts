import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'

/**
 * Makes DATA_DIR ready at start: created 0700 when missing, since it holds the ingest log's event
 * payloads, the embedded engine's data, the signing key and the analysts' password. An existing
 * directory that its group or others can read or write is left as the operator made it, with one warn
 * line naming the path and the fix. Returns whether it was created.
 */
export function prepareDataDir (dir: string, log: Pick<FastifyBaseLogger, 'warn'>): boolean {
  if (makeDirs(dir, 0o700)) return true
  const mode = statSync(dir).mode & 0o777
  if (mode & 0o077) {
    log.warn({ path: dir, mode: mode.toString(8).padStart(4, '0') },
      `DATA_DIR is readable or writable by other users of this machine (event payloads, keys): run chmod 700 ${dir}`)
  }
  return false
}

/**
 * `mkdir -p`: creates `dir` and its missing parents (with `mode`), one level at a time; returns
 * whether it created any. Node's own recursive mkdir never returns where a parent cannot be made
 * but reports ENOENT, as under /proc (`DATA_DIR=/proc/x/data` held the start for ever); here the
 * first level that fails throws its error.
 */
export function makeDirs (dir: string, mode?: number): boolean {
  const missing: string[] = []
  for (let at = resolve(dir); !existsSync(at); at = dirname(at)) {
    missing.unshift(at)
    if (dirname(at) === at) break
  }
  for (const at of missing) {
    try {
      mkdirSync(at, mode === undefined ? undefined : { mode })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
  return missing.length > 0
}

/** Where the kernel describes mounts and file systems; tests point these at a copy. */
export interface KernelFiles { proc: string; sys: string }

const KERNEL: KernelFiles = { proc: '/proc', sys: '/sys' }

/**
 * The kernel's name of the file system holding `dir` (`vda`, `dm-0`) when it is ext4 without a
 * journal, else undefined (another type, a journal, or no /proc to read: not Linux). Without a
 * journal, ext4 skips every inode deleted in the last minutes while it looks for a free one, one
 * buffer lookup each, for every file it creates; the embedded ClickHouse creates and deletes a part's
 * dozen files per table on every insert and merge, so the scan grows with the store's own churn.
 */
export function ext4WithoutJournal (dir: string, kernel: KernelFiles = KERNEL): string | undefined {
  let path: string
  let mounts: string
  try {
    path = realpathSync(dir)
    mounts = readFileSync(`${kernel.proc}/self/mountinfo`, 'utf8')
  } catch {
    return undefined
  }
  // mountinfo: id parent major:minor root mount-point options [optional fields] - type source options
  let best: { point: string; type: string; device: string; source: string } | undefined
  for (const line of mounts.split('\n')) {
    const fields = line.split(' ')
    const dash = fields.indexOf('-')
    if (dash < 0 || fields.length < dash + 3) continue
    const point = fields[4]!.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))
    const inside = point === '/' || path === point || path.startsWith(point + '/')
    if (inside && (!best || point.length >= best.point.length)) {
      best = { point, type: fields[dash + 1]!, device: fields[2]!, source: fields[dash + 2]! }
    }
  }
  if (best?.type !== 'ext4') return undefined
  let name: string
  try {
    name = basename(readlinkSync(`${kernel.sys}/dev/block/${best.device}`))
  } catch {
    name = basename(best.source)
  }
  if (!existsSync(`${kernel.proc}/fs/ext4/${name}`)) return undefined
  let journals: string[]
  try {
    journals = readdirSync(`${kernel.proc}/fs/jbd2`)
  } catch {
    journals = []
  }
  return journals.some((journal) => journal.startsWith(`${name}-`)) ? undefined : name
}

/**
 * One warn line at start when the embedded engine's DATA_DIR is on ext4 without a journal: measured
 * on such a disk, a 10-row insert cost the engine 218-266 ms of CPU against 86-95 ms on a journaled
 * ext4 on the same disk (bench/README.md, "The data directory's file system").
 */
export function warnOfFileSystem (dir: string, log: Pick<FastifyBaseLogger, 'warn'>, kernel: KernelFiles = KERNEL): void {
  const device = ext4WithoutJournal(dir, kernel)
  if (device === undefined) return
  log.warn({ path: dir, device },
    `DATA_DIR is on an ext4 file system without a journal (${device}): each file the embedded ClickHouse creates scans the inodes deleted in the last minutes, 2-3 × the CPU of an insert measured; put DATA_DIR on ext4 with its journal (mkfs.ext4's default), XFS, or CLICKHOUSE_URL's server`)
}
