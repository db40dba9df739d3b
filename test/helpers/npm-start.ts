import type { Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { exited, freePort, waitHealthy } from './service-process.ts'
import { TEST_CLICKHOUSE_ENV, TEST_CLICKHOUSE_URL, TEST_DATABASE_URL, randomId } from './app.ts'
import { seedClickHouseStore } from './clickhouse-template.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The pids of every live descendant of `pid` (from /proc: children of children included). */
function descendants (pid: number): number[] {
  const parents = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // The fields after the command name, which is in parentheses and may hold spaces.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      parents.set(ppid, [...parents.get(ppid) ?? [], Number(entry)])
    } catch { /* gone meanwhile */ }
  }
  const found: number[] = []
  const walk = (p: number) => {
    for (const c of parents.get(p) ?? []) {
      found.push(c)
      walk(c)
    }
  }
  walk(pid)
  return found
}

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function portFree (port: number): Promise<boolean> {
  const server = createServer()
  return new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * Starts `npm start` (its own process group, a temporary DATA_DIR, a free port), waits for /health,
 * sends `signal` to the pid spawn returned (npm's), and checks that the whole process tree is gone
 * within 35 s, the port is free, and the service logged a graceful shutdown.
 */
export async function signalStopsNpmStart (t: Test, signal: 'SIGTERM' | 'SIGINT'): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'npm-start-signals-'))
  // The embedded store migrated already (a first start's migrations are tested elsewhere): the time
  // goes to the signal, not to the migrations.
  if (!TEST_CLICKHOUSE_URL) seedClickHouseStore(dataDir)
  const port = await freePort()
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    // Its own process group, so that teardown can reach an orphan the signal left behind.
    detached: true,
    env: {
      ...process.env,
      PORT: String(port),
      DATA_DIR: dataDir,
      DATABASE_URL: TEST_DATABASE_URL,
      REDIS_PREFIX: `test:${randomId()}:`,
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      ANALYTICS_PORT: 'off',
      ...TEST_CLICKHOUSE_ENV,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  npm.stdout!.on('data', (d) => { output += d })
  npm.stderr!.on('data', (d) => { output += d })
  t.teardown(() => {
    try { process.kill(-npm.pid!, 'SIGKILL') } catch { /* the group is gone: nothing left behind */ }
    rmSync(dataDir, { recursive: true, force: true })
  })

  try {
    await waitHealthy(npm, `http://127.0.0.1:${port}`)
  } catch (err) {
    throw new Error(`${(err as Error).message}; its output:\n${output}`)
  }
  const tree = descendants(npm.pid!)
  t.ok(tree.length > 0, 'npm runs the service in a child process')
  const exit = exited(npm)
  process.kill(npm.pid!, signal)

  const deadline = Date.now() + 35_000
  while (Date.now() < deadline && (alive(npm.pid!) || tree.some(alive))) await new Promise((resolve) => setTimeout(resolve, 100))
  t.same(tree.filter(alive), [], 'no process of the tree outlives npm (no orphan holding the port and DATA_DIR)')
  // The wait for npm's exit ends with it: a timer left running would hold this file's process to the deadline.
  let timer: NodeJS.Timeout | undefined
  await Promise.race([exit, new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())) })])
  clearTimeout(timer)
  t.ok(!alive(npm.pid!), 'npm itself exited')
  t.ok(await portFree(port), 'the port is free')
  t.match(output, new RegExp(`"signal":"${signal}".*shutting down`), `the service got ${signal}`)
  t.match(output, /shut down cleanly/, 'and shut down gracefully')
}
