import { randomBytes } from 'node:crypto'
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs'

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
 * is never seen empty; a stale lock is removed by one process at a time, the one that made the
 * directory `<path>.takeover` (mkdir succeeds once), which reads the lock again there and removes it
 * only if it is still the stale one: nothing else changes the name meanwhile (no other process
 * removes, the stale owner cannot release, and no link succeeds while the name exists). Moving the
 * lock aside and back, as before, left the name empty for a moment, and a third process linked its
 * own lock into it while the lock put back was lost: two processes took it.
 */
export function takePidLock (path: string, refused: (owner: number | null) => Error): () => void {
  const mine = `${process.pid} ${processStart(process.pid) ?? ''}`
  const own = (suffix: string) => `${path}.${suffix}.${process.pid}.${randomBytes(4).toString('hex')}`
  // Enough turns to outwait another process's takeover (a few instructions, 20 ms a turn here).
  for (let attempt = 0; attempt < 50; attempt++) {
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
    removeStale(path, held)
  }
  throw refused(null)
}

/** How long a takeover's directory may stand before it is taken for one whose process died in it. */
const TAKEOVER_STALE_MS = 5_000

/**
 * Removes the lock at `path` if it still holds `stale`, as the one process taking it over; when
 * another process is taking it over, waits a moment instead (the caller then looks again).
 */
function removeStale (path: string, stale: string): void {
  const takeover = `${path}.takeover`
  try {
    mkdirSync(takeover)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    // Another process is at it: the lock it leaves is read next time. A takeover directory left by
    // a process that died in those few instructions is removed once it is old.
    let age = 0
    try {
      age = Date.now() - statSync(takeover).mtimeMs
    } catch { /* gone meanwhile */ }
    if (age > TAKEOVER_STALE_MS) {
      try {
        rmdirSync(takeover)
      } catch { /* another process removed it */ }
    } else {
      sleep(20)
    }
    return
  }
  try {
    if (readOr(path) === stale) rmSync(path, { force: true })
  } finally {
    rmdirSync(takeover)
  }
}

/** Blocks this thread for `ms` (start-up only: the lock is taken before anything else runs). */
function sleep (ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
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
