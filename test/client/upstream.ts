import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface SentEvent { reasoning: string; metadata: Record<string, string>; [key: string]: unknown }
export interface Got { at: number; key: string | undefined; body: string; events: SentEvent[] }
export type Answer = (req: IncomingMessage, res: ServerResponse, got: Got, n: number) => void

/** A local HTTP server answering each POST with `answer`; keeps every request it got. */
export async function upstream (t: { teardown(fn: () => unknown): void }, answer: Answer) {
  const got: Got[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      const g = { at: Date.now(), key: req.headers['idempotency-key'] as string | undefined, body, events: (JSON.parse(body) as { events: SentEvent[] }).events }
      got.push(g)
      answer(req, res, g, got.length)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { got, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

/** A 207 accepting every event, or answering the statuses `statusOf` gives. */
export function accept (res: ServerResponse, g: Got, statusOf: (i: number) => number = () => 202, headers: Record<string, string> = {}) {
  const results = g.events.map((_, i) => {
    const status = statusOf(i)
    return status === 202 ? { status, accepted: true, eventId: `evt_${i}` } : { status, error: status === 429 ? 'rate_limited' : 'validation_failed' }
  })
  res.writeHead(207, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ results }))
}
