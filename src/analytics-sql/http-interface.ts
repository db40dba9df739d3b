import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import { pipeline } from 'node:stream/promises'
import { constants as zlibConstants, createBrotliCompress, createBrotliDecompress, createDeflate, createGunzip, createGzip, createInflate, type BrotliCompress, type Deflate, type Gzip } from 'node:zlib'
import type { Readable } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { AnalyticsError, type AnalyticsEngine, type AnalyticsQuery, type AnalyticsResult } from './engine.ts'
import { passwordMatches } from './password.ts'
import { LoginThrottle, DEFAULT_LOGIN_THROTTLE, type LoginThrottleOptions } from './login-throttle.ts'

/**
 * The subset of ClickHouse's HTTP interface that clients use (the official clients, clickhouse-connect,
 * Grafana's and DBeaver's drivers over HTTP, curl): `GET|POST /` with the query in the `query` URL
 * parameter and/or the body (with the statement in the URL, the body is an insert's rows),
 * `param_<name>` query parameters, settings as URL parameters, `database`, `default_format`,
 * `query_id`, gzip/deflate/br bodies, response compression with `enable_http_compression=1`, `/ping`,
 * credentials by Basic auth, `X-ClickHouse-User`/`-Key` headers or `user`/`password` parameters.
 * Errors are ClickHouse's: `Code: N. DB::Exception: … (TYPE)` with `X-ClickHouse-Exception-Code`.
 * Whether writes are allowed is the engine's mode (read-only for analysts, writable for
 * `npm run clickhouse:serve`).
 */
export interface AnalyticsHttpOptions {
  engine: AnalyticsEngine
  /** The one user allowed in; null lets every request in (a development tool on the loopback). */
  credentials: { user: string; password: string } | null
  log: FastifyBaseLogger
  /** Largest statement (the URL's query or the body holding it), bytes. */
  maxQueryBytes?: number
  /** Largest body (an insert's rows), bytes; maxQueryBytes unless given. */
  maxBodyBytes?: number
  /** X-ClickHouse-Server-Display-Name of the answers. */
  displayName?: string
  /** How failed logins are slowed per client address (DEFAULT_LOGIN_THROTTLE unless given). */
  loginThrottle?: LoginThrottleOptions
}

/** URL parameters that belong to the HTTP layer, not to the engine's settings. */
const HTTP_PARAMETERS = new Set([
  'query', 'user', 'password', 'database', 'query_id', 'session_id', 'session_timeout', 'session_check', 'default_format',
  'compress', 'decompress', 'buffer_size', 'wait_end_of_query', 'enable_http_compression', 'http_zlib_compression_level',
  'send_progress_in_http_headers', 'http_headers_progress_interval_ms', 'http_wait_end_of_query', 'quota_key',
  'cancel_http_readonly_queries_on_client_close', 'add_http_cors_header', 'client_protocol_version', 'role', 'http_response_buffer_size',
  'http_native_compression_disable_checksumming_on_decompress', 'max_query_size',
])

const VERSION = '26.7'
/** A query id that can be echoed in X-ClickHouse-Query-Id. */
const QUERY_ID = /^[\x20-\x7e]{1,256}$/

/**
 * Errors of the query itself that its sender can fix (bad SQL semantics), answered 400 as a client
 * error: NUMBER_OF_COLUMNS_DOESNT_MATCH, NUMBER_OF_ARGUMENTS_DOESNT_MATCH, ARGUMENT_OUT_OF_BOUND,
 * CANNOT_CONVERT_TYPE, MULTIPLE_EXPRESSIONS_FOR_ALIAS, ILLEGAL_AGGREGATION, SIZES_OF_ARRAYS_DONT_MATCH,
 * NOT_AN_AGGREGATE, AMBIGUOUS_COLUMN_NAME, NO_COMMON_TYPE.
 */
const QUERY_ERRORS = [20, 42, 69, 70, 179, 184, 190, 215, 352, 386]

/**
 * HTTP status of an engine error, as ClickHouse's HTTP handler chooses it (and 400 for QUERY_ERRORS;
 * 503 for QUERY_WAS_CANCELLED, which only shutdown causes here: a client may send it again later).
 */
function httpStatusOf (code: number): number {
  if (code === 516 || code === 194 || code === 192) return 401
  if (code === 164 || code === 497 || code === 446 || code === 291) return 403
  if ([60, 46, 47, 81, 16].includes(code)) return 404
  if ([62, 36, 115, 456, 457, 72, 27, 26, 6, 41, 43, 53, 44, ...QUERY_ERRORS].includes(code)) return 400
  if (code === 202 || code === 210 || code === 394) return 503
  return 500
}

function contentType (format: string): string {
  if (/^JSON/.test(format)) return 'application/json; charset=UTF-8'
  // As a server says: the header row is there for the *WithNames formats.
  if (/^CSV/.test(format)) return `text/csv; charset=UTF-8; header=${/WithNames/.test(format) ? 'present' : 'absent'}`
  if (/^(TabSeparated|TSV)/.test(format)) return 'text/tab-separated-values; charset=UTF-8'
  if (/^(RowBinary|Native|Parquet|Arrow|ORC|Avro|Protobuf|MsgPack|CapnProto)/.test(format)) return 'application/octet-stream'
  return 'text/plain; charset=UTF-8'
}

function credentials (req: IncomingMessage, url: URL): { user: string; password: string } {
  const header = req.headers.authorization
  if (header?.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    return { user: colon < 0 ? decoded : decoded.slice(0, colon), password: colon < 0 ? '' : decoded.slice(colon + 1) }
  }
  const user = req.headers['x-clickhouse-user']
  if (typeof user === 'string') return { user, password: String(req.headers['x-clickhouse-key'] ?? '') }
  return { user: url.searchParams.get('user') ?? 'default', password: url.searchParams.get('password') ?? '' }
}

async function readBody (req: IncomingMessage, limit: number): Promise<string> {
  const encoding = String(req.headers['content-encoding'] ?? '').toLowerCase()
  let stream: Readable = req
  if (encoding === 'gzip') stream = req.pipe(createGunzip())
  else if (encoding === 'deflate') stream = req.pipe(createInflate())
  else if (encoding === 'br') stream = req.pipe(createBrotliDecompress())
  else if (encoding && encoding !== 'identity') throw new AnalyticsError(36, 'BAD_ARGUMENTS', `Unknown Content-Encoding: ${encoding}`)
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of stream) {
    size += (chunk as Buffer).length
    if (size > limit) throw new AnalyticsError(62, 'SYNTAX_ERROR', `Max query size exceeded: the query is over ${limit} bytes`)
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function sendError (res: ServerResponse, err: AnalyticsError, queryId: string): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = `Code: ${err.code}. DB::Exception: ${err.message}. (${err.type}) (version ${VERSION})\n`
  res.writeHead(httpStatusOf(err.code), {
    'content-type': 'text/plain; charset=UTF-8',
    'x-clickhouse-exception-code': String(err.code),
    'x-clickhouse-query-id': queryId,
    ...(err.code === 516 ? { 'www-authenticate': 'Basic realm="ClickHouse server"' } : {}),
  })
  res.end(body)
}

/**
 * The compressing stream for what the client accepts, or null. A result of up to
 * ANALYTICS_MAX_RESULT_BYTES is compressed by the stream a chunk at a time on libuv's pool, never on
 * the event loop: compressing 17 MB at once stopped the service's API and ingestion for 42 s.
 * Brotli at quality 5, not its default 11 (slower by some 30 × for a few per cent of size).
 */
function compressor (accept: string): { stream: Gzip | BrotliCompress | Deflate; encoding: string } | null {
  if (/\bgzip\b/.test(accept)) return { stream: createGzip(), encoding: 'gzip' }
  if (/\bbr\b/.test(accept)) return { stream: createBrotliCompress({ params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 5 } }), encoding: 'br' }
  if (/\bdeflate\b/.test(accept)) return { stream: createDeflate(), encoding: 'deflate' }
  return null
}

/**
 * Why a request is not let in (the user it presents, and whether its password was checked at all);
 * null when it may go on. Failed logins are slowed per client address and logged at warn with it
 * (login-throttle.ts).
 */
async function refusedUser (req: IncomingMessage, url: URL, opts: AnalyticsHttpOptions, throttle: LoginThrottle): Promise<{ user: string; unchecked: boolean } | null> {
  if (!opts.credentials) return null
  const remote = req.socket.remoteAddress ?? 'unknown'
  const { user, password } = credentials(req, url)
  const wait = throttle.admit(remote)
  if (wait === null) {
    opts.log.warn({ user, remote }, 'ClickHouse HTTP interface: too many failed logins from this address, refused without checking')
    return { user, unchecked: true }
  }
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
  if (user === opts.credentials.user && passwordMatches(opts.credentials.password, password)) {
    throttle.succeeded(remote)
    return null
  }
  const failures = throttle.failed(remote)
  opts.log.warn({ user, remote, failures }, 'ClickHouse HTTP interface: authentication failed')
  return { user, unchecked: false }
}

/** The refusal of a login: a wrong password, or one not checked because the address failed too often. */
function loginRefusal ({ user, unchecked }: { user: string; unchecked: boolean }, limits: LoginThrottleOptions): AnalyticsError {
  return new AnalyticsError(516, 'AUTHENTICATION_FAILED', unchecked
    ? `${user}: Authentication failed: too many failed logins from this address, so the password was not checked; ` +
      `retry in ${seconds(limits.maxQueueMs)} (each failed login doubles the wait, up to ${seconds(limits.maxMs)}, and a success clears it)`
    : `${user}: Authentication failed: password is incorrect, or there is no user with such name`)
}

function seconds (ms: number): string {
  return `${Math.ceil(ms / 1000)} s`
}

/** The engine's query of a request: statement and rows, parameters, settings and output format. */
function queryOf (req: IncomingMessage, url: URL, body: string): AnalyticsQuery {
  const inUrl = url.searchParams.get('query')
  const params: Record<string, string> = {}
  const settings: Record<string, string> = {}
  for (const [name, value] of url.searchParams) {
    if (name.startsWith('param_')) params[name.slice(6)] = value
    else if (!HTTP_PARAMETERS.has(name) && !name.startsWith('http_')) settings[name] = value
  }
  const database = url.searchParams.get('database') ?? req.headers['x-clickhouse-database']
  const format = req.headers['x-clickhouse-format']
  return {
    sql: inUrl ?? body,
    data: inUrl !== null && body ? body : undefined,
    database: typeof database === 'string' ? database : undefined,
    method: req.method === 'GET' ? 'GET' : 'POST',
    params,
    settings,
    defaultFormat: url.searchParams.get('default_format') ?? (typeof format === 'string' ? format : 'TabSeparated'),
  }
}

/** Refuses what this interface does not speak, rather than answer in a form the client would misread. */
function refuseUnsupported (url: URL, writable: boolean): void {
  // ClickHouse's own compressed framing (compress=1 / decompress=1): HTTP compression works instead.
  if (url.searchParams.get('compress') === '1' || url.searchParams.get('decompress') === '1') {
    throw new AnalyticsError(36, 'BAD_ARGUMENTS', 'compress=1 and decompress=1 (ClickHouse\'s native compression) are not supported here: use HTTP compression (enable_http_compression=1 with Accept-Encoding) or none')
  }
  // A server keeps a session's settings and temporary tables between requests; each request here
  // has its own connection, so a session would silently lose them.
  if (writable && url.searchParams.get('session_id')) {
    throw new AnalyticsError(36, 'BAD_ARGUMENTS', 'server-side sessions (session_id) are not supported here: each request runs on its own connection')
  }
}

function summaryOf (result: AnalyticsResult): string {
  return JSON.stringify({
    read_rows: String(result.rows),
    read_bytes: String(result.bytes),
    // The embedded engine does not report what a statement wrote.
    written_rows: '0',
    written_bytes: '0',
    total_rows_to_read: '0',
    result_rows: String(result.rows),
    result_bytes: String(result.body.length),
    elapsed_ns: String(result.elapsedMs * 1_000_000),
  })
}

/** Builds the HTTP server of ClickHouse's HTTP interface over the engine; listening and closing are the caller's. */
export function createAnalyticsHttpServer (opts: AnalyticsHttpOptions): Server {
  const maxQueryBytes = opts.maxQueryBytes ?? 1024 * 1024
  const maxBodyBytes = opts.maxBodyBytes ?? maxQueryBytes
  const throttle = new LoginThrottle(opts.loginThrottle ?? DEFAULT_LOGIN_THROTTLE)
  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL, queryId: string) => {
    const ok = () => {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' })
      res.end('Ok.\n')
    }
    if (url.pathname === '/ping' || url.pathname === '/replicas_status') return ok()
    if (url.pathname !== '/') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=UTF-8' })
      res.end(`There is no handle ${url.pathname}\n`)
      return
    }
    if (req.method !== 'GET' && req.method !== 'POST') {
      res.writeHead(405, { allow: 'GET, POST', 'content-type': 'text/plain; charset=UTF-8' })
      res.end('Method not allowed\n')
      return
    }
    const refused = await refusedUser(req, url, opts, throttle)
    if (refused !== null) {
      req.resume()
      return sendError(res, loginRefusal(refused, opts.loginThrottle ?? DEFAULT_LOGIN_THROTTLE), queryId)
    }
    const body = req.method === 'POST' ? await readBody(req, maxBodyBytes) : ''
    const query = queryOf(req, url, body)
    if (!query.sql.trim() && !query.data?.trim()) return ok()
    if (Buffer.byteLength(query.sql) > maxQueryBytes) throw new AnalyticsError(62, 'SYNTAX_ERROR', `Max query size exceeded: the query is over ${maxQueryBytes} bytes`)
    refuseUnsupported(url, opts.engine.access.writable)
    const result = await opts.engine.run(query)
    opts.log.info({ queryId, ms: result.elapsedMs, rows: result.rows, format: result.format }, 'ClickHouse HTTP interface query')
    const wantsCompression = url.searchParams.get('enable_http_compression') === '1'
    const compressed = wantsCompression ? compressor(String(req.headers['accept-encoding'] ?? '')) : null
    res.writeHead(200, {
      'content-type': contentType(result.format),
      'x-clickhouse-format': result.format,
      'x-clickhouse-query-id': queryId,
      'x-clickhouse-timezone': 'UTC',
      'x-clickhouse-server-display-name': opts.displayName ?? 'agent-telemetry',
      'x-clickhouse-summary': summaryOf(result),
      ...(compressed ? { 'content-encoding': compressed.encoding } : { 'content-length': result.body.length }),
    })
    if (!compressed) return void res.end(result.body)
    compressed.stream.end(result.body)
    // A client gone meanwhile ends the pipeline with an error: nothing is left to answer it.
    await pipeline(compressed.stream, res).catch(() => res.destroy())
  }
  // A server takes URLs up to http_max_uri_size (1 MiB): query parameters travel in them.
  const server = createServer({ maxHeaderSize: 1024 * 1024 }, (req, res) => {
    let url: URL
    try {
      url = new URL(req.url ?? '/', 'http://analytics')
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain; charset=UTF-8' }).end('Cannot parse the request URL\n')
      return
    }
    // The id is echoed in a header: one that cannot be a header value is refused, not echoed.
    const asked = url.searchParams.get('query_id')
    const queryId = asked && QUERY_ID.test(asked) ? asked : randomUUID()
    if (asked && queryId !== asked) {
      req.resume()
      sendError(res, new AnalyticsError(36, 'BAD_ARGUMENTS', 'query_id must be 1 to 256 printable ASCII characters'), queryId)
      return
    }
    handle(req, res, url, queryId).catch((err: unknown) => {
      const known = err instanceof AnalyticsError
      if (!known) opts.log.error({ err }, 'ClickHouse HTTP interface: unexpected error')
      else opts.log.info({ queryId, code: err.code, type: err.type }, 'ClickHouse HTTP interface: query refused or failed')
      sendError(res, known ? err : new AnalyticsError(1001, 'STD_EXCEPTION', 'internal error'), queryId)
    })
  })
  server.keepAliveTimeout = 10_000
  server.requestTimeout = 60_000
  return server
}
