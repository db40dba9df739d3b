import { randomBytes } from 'node:crypto'
import { closeSync, linkSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs'

/**
 * Whether a directory's owner, named by a pid, still runs: the one question behind the ingest log's
 * lock file and the embedded ClickHouse's status file (src/startup-failure.ts). A pid can be reused
 * after its process ended (a crash, a reboot), so the owner is also known by what else was recorded
 * of it: its start time (clock ticks since boot, from /proc), or a word its command line holds.
 */

/** When a process started (clock ticks since boot, from /proc/<pid>/stat), or null when that cannot be read. */
export function processStart (pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

/**
 * Whether `pid` is another process that is running and is the recorded owner: started at `started`
 * when that was recorded, its command line holding `command` when that is given (where /proc can be
 * read; without /proc the pid alone is trusted). This process is never the other owner.
 */
export function ownerRuns (pid: number, owner: { started?: string | undefined; command?: string } = {}): boolean {
  if (!(pid > 0) || pid === process.pid) return false
  try {
    process.kill(pid, 0)
  } catch (err) {
    // EPERM: it runs, as another user.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false
  }
  if (owner.started) {
    const started = processStart(pid)
    if (started !== null && started !== owner.started) return false
  }
  if (owner.command !== undefined) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(owner.command)) return false
    } catch {
      // No /proc (macOS): trust the pid.
    }
  }
  return true
}

/**
 * Takes the lock file at `path` for this process: a file naming its pid and start time, created only
 * if absent. A lock whose owner no longer runs (see ownerRuns) is stale and taken over; a live owner's
 * lock throws `refused(pid)`, and a lock that could not be taken at all `refused(null)`. Answers the
 * function that releases the lock.
 *
 * Processes starting together over one stale lock take it once between them: the lock is made whole
 * in a file of this process's own, then linked to its name (which fails when the name exists), so it
 * is never seen empty; a stale lock is first renamed aside (one rename of a file succeeds), and when
 * what was renamed is not the stale lock read before (another process took it over in between), it
 * is put back and this process looks again.
 */
export function takePidLock (path: string, refused: (owner: number | null) => Error): () => void {
  const mine = `${process.pid} ${processStart(process.pid) ?? ''}`
  const own = (suffix: string) => `${path}.${suffix}.${process.pid}.${randomBytes(4).toString('hex')}`
  for (let attempt = 0; attempt < 5; attempt++) {
    const made = own('new')
    try {
      // In the try: a write that fails (a full disk) leaves no file of its own behind.
      writeFileSync(made, mine)
      linkOrCreate(made, path, mine)
      return () => {
        if (readOr(path) === mine) rmSync(path, { force: true })
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    } finally {
      rmSync(made, { force: true })
    }
    const held = readOr(path)
    if (held === null) continue // released meanwhile
    const [pidText, started] = held.trim().split(' ')
    const owner = Number(pidText)
    if (ownerRuns(owner, { started })) throw refused(owner)
    const aside = own('stale')
    try {
      renameSync(path, aside)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue // another process moved it first
      throw err
    }
    if (readOr(aside) !== held) {
      // A lock another process took between the read and the rename: back where it was.
      try {
        linkSync(aside, path)
      } catch { /* a third one holds the name now: looked at again below */ }
    }
    rmSync(aside, { force: true })
  }
  throw refused(null)
}

/**
 * Gives `path` the file `made` (holding `text`), failing with EEXIST when it exists. On a file system
 * without hard links, the file is created exclusively and written instead (briefly empty: a race
 * over a stale lock is then not ruled out, as on such systems generally).
 */
function linkOrCreate (made: string, path: string, text: string): void {
  try {
    linkSync(made, path)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err
    const fd = openSync(path, 'wx')
    try {
      writeSync(fd, text)
    } finally {
      closeSync(fd)
    }
  }
}

/** A file's text, or null when it cannot be read (gone). */
function readOr (path: string): string | null {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return null
  }
}
