import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

interface Teardown { teardown(fn: () => unknown): void }

/** A port nothing listens on now (the service is then started on it). */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** The service (`src/main.ts`) in a process of its own with these settings, SIGKILLed at teardown if still running. */
export function startService (t: Teardown, env: Record<string, string | undefined>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit'] })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return child
}

/** Resolves once `${base}/health` answers 200; throws if the process exits first or after `ms`. */
export async function waitHealthy (child: ChildProcess, base: string, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service at ${base} exited with ${child.exitCode}`)
    try {
      const res = await request(`${base}/health`)
      await res.body.dump()
      if (res.statusCode === 200) return
    } catch { /* not listening yet */ }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the service at ${base} did not become healthy`)
}

/** Resolves with the exit code and signal of a child process once it exits. */
export function exited (child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
}
