import { lookup, type LookupAddress, type LookupAllOptions } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import type { Agent } from 'undici'
import { parseDestination } from '../domain/notifications.ts'
import { addressKind, isPublicAddress } from '../domain/public-address.ts'

/** One HTTP POST of a notification. */
export interface OutgoingRequest {
  url: string
  headers: Record<string, string>
  body: string
}

/** How one attempt went: a 2xx is a success; anything else (3xx included: redirects are not followed) a failure. */
export interface AttemptResult {
  ok: boolean
  /** The answer's status, or null when none came (refused destination, connection error, timeout). */
  statusCode: number | null
  /** Why it failed, for people; null on success. */
  error: string | null
  /** The first RESPONSE_KEEP_BYTES of the answer's body. */
  response: string | null
  /** The destination cannot be used (not a URL, or refused): trying again would fail the same way. */
  permanent: boolean
}

export interface SenderOptions {
  /** Let destinations resolve to loopback, private or link-local addresses (local use and tests). */
  allowPrivateNetworks: boolean
}

/** Longest attempt, from connecting to the end of what is read of the answer. */
export const ATTEMPT_TIMEOUT_MS = 5_000
/** Of an answer's body, only this much is read and kept. */
export const RESPONSE_KEEP_BYTES = 1024

/** A destination that resolves to an address the service must not reach; no connection is made. */
export class RefusedDestination extends Error {
  readonly code = 'ERR_DESTINATION_REFUSED'
}

// ipaddr.js's names of the ranges people meet most, in words.
const KIND_WORDS: Record<string, string> = {
  linkLocal: 'link-local', uniqueLocal: 'unique-local', carrierGradeNat: 'carrier-grade NAT', ipv4Mapped: 'IPv4-mapped',
  rfc6052: 'NAT64 (RFC 6052)', rfc6145: 'IPv4-translated (RFC 6145)', '6to4': '6to4', teredo: 'Teredo',
}

/** The setting that lifts the refusal, named in it so that an operator reading it knows where to look. */
const ALLOW_SETTING = 'NOTIFY_ALLOW_PRIVATE_NETWORKS=1 allows such destinations (local use and tests only)'

function refusal (host: string, address: string): RefusedDestination {
  const word = KIND_WORDS[addressKind(address)] ?? addressKind(address)
  // "an" before a vowel's sound: an unspecified, an IPv4-mapped, a unique-local address.
  const kind = `${/^(?:[aeio]|u(?!ni))/i.test(word) ? 'an' : 'a'} ${word} address, not on the public internet`
  const what = host === address ? `refused: ${address} is ${kind}` : `refused: ${host} resolves to ${address}, ${kind}`
  return new RefusedDestination(`${what}; ${ALLOW_SETTING}`)
}

/**
 * The DNS lookup of every connection the sender opens: it resolves as usual, then refuses the
 * connection when any address of the name is not public. Checking the resolved address at connect
 * time, on the very addresses the socket will use, is what stops a name that resolved to a public
 * address when the channel was created from pointing inside the network later (DNS rebinding).
 */
function publicOnlyLookup (hostname: string, options: LookupAllOptions | object, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void): void {
  lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, [])
    const bad = addresses.find((a) => !isPublicAddress(a.address))
    if (bad) return callback(refusal(hostname, bad.address), [])
    if ((options as { all?: boolean }).all) return callback(null, addresses)
    callback(null, addresses[0]!.address, addresses[0]!.family)
  })
}

/** The host of a URL without IPv6 brackets. */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1')

/** How long creating or changing a channel waits for its host name to resolve. */
const DESTINATION_LOOKUP_MS = 3000

type LookupAll = (host: string, options: LookupAllOptions, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void

/** The addresses a name resolves to; none when it does not resolve, or not within `timeoutMs`. */
export function addressesOf (host: string, timeoutMs: number, resolveAll: LookupAll = lookup): Promise<string[]> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve([]), timeoutMs)
    resolveAll(host, { all: true }, (err, found) => {
      clearTimeout(timer)
      resolve(err ? [] : found.map((a) => a.address))
    })
  })
}

/**
 * Why the service would refuse to send to `url`, or null. An IP address is judged as it is; a name
 * is resolved (a name that does not resolve now, or not within 3 s, is not refused: the check at
 * delivery still applies, and the delivery log will show it).
 */
export async function destinationProblem (url: URL, allowPrivateNetworks: boolean): Promise<string | null> {
  if (allowPrivateNetworks) return null
  const host = hostOf(url)
  const addresses = isIP(host) ? [host] : await addressesOf(host, DESTINATION_LOOKUP_MS)
  const bad = addresses.find((a) => !isPublicAddress(a))
  return bad ? refusal(host, bad).message : null
}

/**
 * Sends notifications over HTTP: POST with a 5 s limit on the whole attempt, no redirects followed,
 * at most 1 KB of the answer read, and (unless private networks are allowed) only to public
 * addresses, checked on the address each connection actually uses.
 */
export class NotificationSender {
  // undici is loaded with the first delivery: most processes (and every test app) never send one.
  private client?: Promise<{ agent: Agent, request: typeof import('undici').request }>

  constructor (private readonly opts: SenderOptions) {}

  private http (): Promise<{ agent: Agent, request: typeof import('undici').request }> {
    this.client ??= import('undici').then(({ Agent, request }) => ({
      agent: new Agent({
        connect: { timeout: ATTEMPT_TIMEOUT_MS, ...(this.opts.allowPrivateNetworks ? {} : { lookup: publicOnlyLookup as LookupFunction }) },
        headersTimeout: ATTEMPT_TIMEOUT_MS,
        bodyTimeout: ATTEMPT_TIMEOUT_MS,
      }),
      request,
    }))
    return this.client
  }

  async send (req: OutgoingRequest): Promise<AttemptResult> {
    // A URL stored before URLs were parsed on the way in may not be one.
    const parsed = parseDestination(req.url)
    if ('problem' in parsed) return { ok: false, statusCode: null, error: `the destination URL ${parsed.problem}`, response: null, permanent: true }
    const url = parsed.url
    // A literal address never reaches the lookup: judge it here, before any connection.
    const host = hostOf(url)
    if (!this.opts.allowPrivateNetworks && isIP(host) && !isPublicAddress(host)) {
      return { ok: false, statusCode: null, error: refusal(host, host).message, response: null, permanent: true }
    }
    try {
      const { agent, request } = await this.http()
      const res = await request(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', 'user-agent': 'agent-telemetry-notifications', ...req.headers },
        body: req.body,
        signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
      })
      const response = await readHead(res.body)
      const ok = res.statusCode >= 200 && res.statusCode < 300
      return { ok, statusCode: res.statusCode, error: ok ? null : `HTTP ${res.statusCode}${redirectedTo(res.statusCode, res.headers.location)}`, response, permanent: false }
    } catch (err) {
      return { ok: false, statusCode: null, error: describe(err), response: null, permanent: refusedIn(err) !== undefined }
    }
  }

  async close (): Promise<void> {
    if (this.client) await (await this.client).agent.close()
  }
}

/** The first RESPONSE_KEEP_BYTES of a body as text (NULs dropped: Postgres text cannot hold them); the rest is not read. */
async function readHead (body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    chunks.push(chunk)
    size += chunk.length
    if (size >= RESPONSE_KEEP_BYTES) break
  }
  body.destroy()
  return Buffer.concat(chunks).subarray(0, RESPONSE_KEEP_BYTES).toString('utf8').replaceAll('\u0000', '')
}

// undici wraps some connection errors; the refusal or the system error may be a cause.
function causes (err: unknown): (Error & { code?: string })[] {
  const chain: (Error & { code?: string })[] = []
  for (let e = err as (Error & { code?: string; cause?: unknown }) | undefined; e && chain.length < 5; e = e.cause as typeof e) chain.push(e)
  return chain
}

const refusedIn = (err: unknown) => causes(err).find((e) => e instanceof RefusedDestination)

/** A failed attempt in a few words, without internals. */
function describe (err: unknown): string {
  const chain = causes(err)
  const refused = refusedIn(err)
  if (refused) return refused.message
  const e = chain.find((x) => x.code) ?? chain[0]
  if (!e) return 'failed'
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.code?.includes('TIMEOUT')) return `timed out after ${ATTEMPT_TIMEOUT_MS / 1000} s`
  if (e.code === 'ENOTFOUND') return 'the host name does not resolve'
  if (e.code === 'ECONNREFUSED') return 'connection refused'
  return e.code ? `connection failed (${e.code})` : 'connection failed'
}

/**
 * Where a redirect points (` to https://…`, cut to 200 characters), for the delivery's error:
 * redirects are not followed, and an `http://` destination moved to `https://` is the usual reason.
 */
function redirectedTo (status: number, location: string | string[] | undefined): string {
  const to = Array.isArray(location) ? location[0] : location
  if (status < 300 || status >= 400 || !to) return ''
  // eslint-disable-next-line no-control-regex -- a header's control characters are not shown
  const shown = to.replace(/[\u0000-\u001f\u007f]/g, '')
  return ` to ${shown.length > 200 ? `${shown.slice(0, 199)}…` : shown} (redirects are not followed: use that address)`
}
