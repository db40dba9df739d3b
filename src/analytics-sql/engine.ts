import type { Session } from 'chdb'

/**
 * Read-only SQL for analysts on the embedded engine (the engine behind the analysts' HTTP port).
 *
 * The embedded engine is one per process and shared with the service, but each chDB connection
 * (`Session`) carries its own settings. So every analyst query gets two fresh connections to the
 * same data directory: one that checks the query, and one that runs it after `SET`ting the caller's
 * parameters and allowed settings, then our caps, then `readonly = 1` last (which the engine does not
 * let anyone undo). Nothing set there can reach the service's connection, and nothing the service
 * sets reaches analysts.
 *
 * What `readonly = 1` does not refuse in the embedded engine, the check does: more than one statement
 * (the embedded engine runs them all), `INTO OUTFILE`, statements other than SELECT / EXPLAIN / SHOW /
 * DESCRIBE / EXISTS (`KILL QUERY` passes readonly), table functions other than local generators, and
 * the scalar functions that read the machine's files (`file`). The check parses with the engine itself
 * (`formatQuery`, `EXPLAIN AST`), and the statement run is the engine's own formatting of the query,
 * so what was checked is what runs.
 */
export interface AnalyticsCaps {
  maxExecutionSeconds: number
  maxMemoryBytes: number
  maxResultRows: number
  maxResultBytes: number
  maxThreads: number
  maxConcurrentQueries: number
}

export interface AnalyticsQuery {
  sql: string
  /** Query parameters as sent over HTTP (`param_x`), in ClickHouse's escaped text form. */
  params: Record<string, string>
  /** Settings the client asked for (URL parameters that are not HTTP-level ones). */
  settings: Record<string, string>
  /** The output format when the query has no FORMAT clause. */
  defaultFormat: string
}

export interface AnalyticsResult {
  body: Buffer
  format: string
  rows: number
  bytes: number
  elapsedMs: number
}

/** An engine error in ClickHouse's shape (code, type, message), as the HTTP interface reports it. */
export class AnalyticsError extends Error {
  constructor (readonly code: number, readonly type: string, message: string) {
    super(message)
  }
}

/** Table functions that only generate or reshape data inside the engine. Every other one is refused. */
const ALLOWED_TABLE_FUNCTIONS = new Set([
  'numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'generate_series', 'generateseries', 'primes', 'values', 'view', 'generaterandom',
])
/** Functions that read the machine's files or load external models. */
const REFUSED_FUNCTIONS = new Set(['file', 'catboostevaluate', 'naivebayesclassifier', 'showcertificate'])
/** First node of the statement's syntax tree, for the statements analysts may run. */
const ALLOWED_STATEMENTS = /^(SelectWithUnionQuery|SelectIntersectExceptQuery|Explain|Show\w*|DescribeQuery|Exists\w*)\b/
/** Settings a client may choose (output shape and harmless query behaviour). */
const CLIENT_SETTINGS = /^(output_format_\w+|format_\w+|input_format_\w+|date_time_output_format|date_time_input_format|join_use_nulls|extremes|session_timezone|enable_analyzer|allow_experimental_analyzer|max_block_size|max_rows_to_read|max_bytes_to_read|max_rows_to_group_by|prefer_column_name_to_alias|cast_keep_nullable|aggregate_functions_null_for_empty|transform_null_in|use_query_cache|optimize_\w+)$/
/** Settings a client may lower but never raise past our cap. */
const CAPPED: Record<string, keyof AnalyticsCaps> = {
  max_execution_time: 'maxExecutionSeconds',
  max_memory_usage: 'maxMemoryBytes',
  max_result_rows: 'maxResultRows',
  max_result_bytes: 'maxResultBytes',
  max_threads: 'maxThreads',
}
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

function literal (s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

/** Maps a chDB error (`Code: N. DB::Exception: … (TYPE)`) to an AnalyticsError. */
export function toAnalyticsError (err: unknown): AnalyticsError {
  if (err instanceof AnalyticsError) return err
  const message = err instanceof Error ? err.message : String(err)
  const m = /Code: (\d+)\. (?:.*DB::Exception: )?(.*?)\s*\(([A-Z0-9_]{3,})\)(?: \(version [^)]*\))?[.\s]*$/s.exec(message)
  if (m) return new AnalyticsError(Number(m[1]), m[3]!, m[2]!.replace(/^Code: \d+\. DB::Exception: /, '').trim())
  if ((err as { code?: string })?.code === 'CHDB_TIMEOUT') {
    return new AnalyticsError(159, 'TIMEOUT_EXCEEDED', 'Timeout exceeded: the query ran past the analysts\' time limit')
  }
  return new AnalyticsError(1001, 'STD_EXCEPTION', message)
}

function refuse (message: string): AnalyticsError {
  return new AnalyticsError(164, 'READONLY', message)
}

/** The functions and table functions named in an `EXPLAIN AST` listing: `[name, isTableFunction]`. */
export function functionsInAst (ast: string): Array<[string, boolean]> {
  const found: Array<[string, boolean]> = []
  const stack: Array<{ depth: number; node: string }> = []
  for (const line of ast.split('\n')) {
    if (!line.trim()) continue
    const depth = line.length - line.trimStart().length
    const node = line.trim()
    while (stack.length && stack[stack.length - 1]!.depth >= depth) stack.pop()
    const fn = /^Function (\S+)/.exec(node)
    if (fn) found.push([fn[1]!.toLowerCase(), stack[stack.length - 1]?.node.startsWith('TableExpression') ?? false])
    stack.push({ depth, node })
  }
  return found
}

type SessionClass = typeof Session

export class AnalyticsEngine {
  private active = 0
  private readonly inFlight = new Set<Promise<unknown>>()
  private closed = false

  /** Queries running now. */
  get running (): number {
    return this.active
  }

  private constructor (private readonly SessionCtor: SessionClass, private readonly path: string, readonly caps: AnalyticsCaps) {}

  /** Opens the analysts' side of the embedded engine whose data lives at `path` (chdb is loaded here, only in embedded mode). */
  static async open (path: string, caps: AnalyticsCaps): Promise<AnalyticsEngine> {
    const chdb = await import('chdb')
    return new AnalyticsEngine(chdb.Session, path, caps)
  }

  /** Runs one analyst query; throws AnalyticsError with the engine's code and type. */
  async run (query: AnalyticsQuery): Promise<AnalyticsResult> {
    if (this.closed) throw new AnalyticsError(210, 'NETWORK_ERROR', 'the service is shutting down')
    if (this.active >= this.caps.maxConcurrentQueries) {
      throw new AnalyticsError(202, 'TOO_MANY_SIMULTANEOUS_QUERIES',
        `Too many simultaneous queries. Maximum: ${this.caps.maxConcurrentQueries}`)
    }
    this.active++
    const work = this.execute(query)
    this.inFlight.add(work)
    try {
      return await work
    } finally {
      this.inFlight.delete(work)
      this.active--
    }
  }

  private setup (query: AnalyticsQuery, withSettings: boolean): string {
    const statements: string[] = []
    for (const [name, value] of Object.entries(query.params)) {
      if (!NAME.test(name)) throw new AnalyticsError(457, 'BAD_QUERY_PARAMETER', `Invalid query parameter name: ${name}`)
      statements.push(`SET param_${name} = ${literal(value)}`)
    }
    if (withSettings) {
      const chosen: Record<string, string> = {}
      for (const [name, value] of Object.entries(query.settings)) {
        if (!NAME.test(name)) throw new AnalyticsError(115, 'UNKNOWN_SETTING', `Unknown setting ${name}`)
        if (name === 'readonly') continue
        const cap = CAPPED[name]
        if (cap) {
          const asked = Number(value)
          if (!Number.isFinite(asked) || asked < 0) throw new AnalyticsError(72, 'CANNOT_PARSE_NUMBER', `Cannot parse ${name} = ${value}`)
          if (asked > 0 && asked < this.caps[cap]) chosen[name] = String(Math.floor(asked))
          continue
        }
        if (!CLIENT_SETTINGS.test(name)) throw refuse(`Cannot modify '${name}' setting in readonly mode`)
        chosen[name] = value
      }
      for (const [name, value] of Object.entries(chosen)) statements.push(`SET ${name} = ${literal(value)}`)
      const c = this.caps
      statements.push(
        `SET max_execution_time = ${chosen.max_execution_time ?? c.maxExecutionSeconds}`,
        `SET max_memory_usage = ${chosen.max_memory_usage ?? c.maxMemoryBytes}`,
        `SET max_result_rows = ${chosen.max_result_rows ?? c.maxResultRows}`,
        `SET max_result_bytes = ${chosen.max_result_bytes ?? c.maxResultBytes}`,
        `SET max_threads = ${chosen.max_threads ?? c.maxThreads}`,
        "SET result_overflow_mode = 'throw'",
        "SET timeout_overflow_mode = 'throw'",
        'SET allow_introspection_functions = 0',
      )
    }
    statements.push('SET readonly = 1')
    return statements.join('; ')
  }

  /** Checks the query with the engine's parser; returns the statement to run and its output format. */
  private async check (session: Session, query: AnalyticsQuery): Promise<{ statement: string; format: string }> {
    let formatted: string
    try {
      formatted = (await session.queryAsync(`SELECT formatQuery(${literal(query.sql)})`, { format: 'TSVRaw' })).text().trim()
    } catch (err) {
      throw toAnalyticsError(err)
    }
    if (!formatted) throw new AnalyticsError(62, 'SYNTAX_ERROR', 'Empty query')
    let statement = formatted
    let format = query.defaultFormat
    const withFormat = /\nFORMAT (\w+)$/.exec(formatted)
    if (withFormat) {
      format = withFormat[1]!
      statement = formatted.slice(0, withFormat.index)
    }
    if (/\bINTO\s+OUTFILE\b/i.test(statement)) throw refuse('INTO OUTFILE is not allowed')
    let ast: string
    try {
      ast = (await session.queryAsync(`EXPLAIN AST ${statement}`, { format: 'TSVRaw' })).text()
    } catch (err) {
      throw toAnalyticsError(err)
    }
    const kind = ast.trimStart().split(/\s/, 1)[0] ?? ''
    if (!ALLOWED_STATEMENTS.test(kind)) throw refuse(`Only SELECT, EXPLAIN, SHOW, DESCRIBE and EXISTS queries are allowed (got ${kind})`)
    for (const [name, table] of functionsInAst(ast)) {
      if (table && !ALLOWED_TABLE_FUNCTIONS.has(name)) throw refuse(`Table function ${name} is not allowed: only the service's tables can be read`)
      if (!table && REFUSED_FUNCTIONS.has(name)) throw refuse(`Function ${name} is not allowed`)
    }
    return { statement, format }
  }

  private async execute (query: AnalyticsQuery): Promise<AnalyticsResult> {
    const guard = new this.SessionCtor(this.path)
    let runner: Session | undefined
    try {
      try {
        await guard.queryAsync(this.setup(query, false))
      } catch (err) {
        throw toAnalyticsError(err)
      }
      const { statement, format } = await this.check(guard, query)
      runner = new this.SessionCtor(this.path)
      try {
        await runner.queryAsync(this.setup(query, true))
      } catch (err) {
        throw toAnalyticsError(err)
      }
      const started = Date.now()
      try {
        // The engine stops the query at max_execution_time; the timeout only answers the client if it did not.
        const result = await runner.queryAsync(statement, { format, timeout: (this.caps.maxExecutionSeconds + 10) * 1000 })
        const body = Buffer.from(result.bytes())
        return { body, format, rows: result.rowsRead ?? 0, bytes: result.bytesRead ?? 0, elapsedMs: Date.now() - started }
      } catch (err) {
        throw toAnalyticsError(err)
      }
    } finally {
      guard.close()
      runner?.close()
    }
  }

  /** Refuses new queries and waits for those running. */
  async close (): Promise<void> {
    this.closed = true
    await Promise.allSettled([...this.inFlight])
  }
}
