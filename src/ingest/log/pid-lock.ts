import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs'

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
 */
export function takePidLock (path: string, refused: (owner: number | null) => Error): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx')
      writeSync(fd, `${process.pid} ${processStart(process.pid) ?? ''}`)
      closeSync(fd)
      return () => rmSync(path, { force: true })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      const [pidText, started] = readFileSync(path, 'utf8').trim().split(' ')
      const owner = Number(pidText)
      if (ownerRuns(owner, { started })) throw refused(owner)
      rmSync(path, { force: true })
    }
  }
  throw refused(null)
}
