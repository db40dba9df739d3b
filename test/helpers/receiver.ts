import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

export interface Received { path: string; headers: IncomingHttpHeaders; body: string }

/** How the receiver answers a path: a status (and body) per request, in order; the last one repeats. */
export type Script = { status: number; body?: string }[]

/**
 * A real HTTP receiver on a local port, as a webhook, Slack or PagerDuty endpoint would be: it
 * records every request and counts connections (to show that a refused destination was never
 * connected to). Paths answer 200 unless scripted.
 */
export async function startReceiver (t: { teardown(fn: () => unknown): void }) {
  const received: Received[] = []
  const scripts = new Map<string, Script>()
  let connections = 0
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const path = req.url ?? '/'
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') })
      const script = scripts.get(path)
      const answer = (script && script.length > 1 ? script.shift() : script?.[0]) ?? { status: 200, body: 'ok' }
      res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body ?? '')
    })
  })
  server.on('connection', () => { connections++ })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }))
  const port = (server.address() as AddressInfo).port
  return {
    port,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    received,
    get connections () { return connections },
    script: (path: string, answers: Script) => { scripts.set(path, [...answers]) },
    /** The requests to a path. */
    at: (path: string) => received.filter((r) => r.path === path),
  }
}

/** Polls `what` every 50 ms until it returns something truthy, or throws after `ms`. */
export async function until<T> (what: () => Promise<T | undefined | null | false> | T | undefined | null | false, ms = 15_000, label = 'condition'): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const found = await what()
    if (found) return found
    if (Date.now() > deadline) throw new Error(`${label} not met within ${ms} ms`)
    await sleep(50)
  }
}
