import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Socket } from 'node:net'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { TS_LOADER_ARGS } from './ts-loader.ts'

/** A ClickHouse HTTP endpoint served by `npm run clickhouse:serve` in a child process. */
export interface ClickHouseEndpoint {
  /** `http://127.0.0.1:PORT`, for CLICKHOUSE_URL or createClient. */
  url: string
  /** The DATA_DIR it serves (its engine's files are under `clickhouse/`). */
  dataDir: string
  /** Stops the child (SIGTERM, then waits for its exit); removes dataDir when this helper made it. */
  close(): Promise<void>
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const LISTENING = /^clickhouse-serve listening on (http:\/\/\S+)$/
const START_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 15_000

/**
 * Starts a ClickHouse endpoint over a fresh embedded engine (or the one under `opts.dataDir`) on a
 * free port (or `opts.port`, to come back where a stopped one was), and resolves once it accepts queries. It does not keep this process alive; it is killed
 * when this process exits, and stops by itself when this process is killed.
 */
export async function startClickHouseEndpoint (opts: { dataDir?: string; port?: number } = {}): Promise<ClickHouseEndpoint> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'clickhouse-serve-'))
  const child = spawn(process.execPath, [...TS_LOADER_ARGS, 'src/cli/clickhouse-serve.ts', '--port', String(opts.port ?? 0), '--data-dir', dataDir, '--exit-with-parent'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const removeDataDir = () => {
    if (opts.dataDir) return
    try {
      // Retries: at this process's exit the child may still be writing as it dies.
      rmSync(dataDir, { recursive: true, force: true, maxRetries: 5 })
    } catch {
      // A temporary directory left behind is no reason to fail a test run.
    }
  }
  const killOnExit = () => {
    child.kill('SIGKILL')
    removeDataDir()
  }
  process.once('exit', killOnExit)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    // Only the start's messages are kept, for the error below; the child's later logs pass through.
    if (stderr.length < 64 * 1024) stderr += chunk
    process.stderr.write(chunk)
  })
  const cleanUp = () => {
    process.off('exit', killOnExit)
    removeDataDir()
  }
  let url: string
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`clickhouse-serve did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS)
      createInterface({ input: child.stdout }).on('line', (line) => {
        const m = LISTENING.exec(line)
        if (!m) return
        clearTimeout(timer)
        resolve(m[1]!)
      })
      child.once('exit', (code, signal) => {
        clearTimeout(timer)
        reject(new Error(`clickhouse-serve exited (${signal ?? code}) before listening:\n${stderr}`))
      })
    })
  } catch (err) {
    child.kill('SIGKILL')
    await exited
    cleanUp()
    throw err
  }
  // Running, it must not keep this process alive: a test file ends when its tests do.
  child.unref()
  for (const stream of [child.stdout, child.stderr]) (stream as Partial<Socket>).unref?.()
  return {
    url,
    dataDir,
    async close () {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      // It finishes the queries running first; one that hangs must not hang the test run.
      const hung = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS)
      await exited
      clearTimeout(hung)
      cleanUp()
    },
  }
}
