import type { Session } from 'chdb'
import {
  analystFormat, checkAnalystSetting, checkAnalystStatement, checkServeFormat, checkServeSetting, checkServeStatement, defaultTableNames,
  refuseControlCharactersInParameters,
  SandboxRefusal, type TableFunctionNames,
} from './sandbox.ts'

export { functionsInAst } from './sandbox.ts'

/**
 * SQL over the embedded engine, as ClickHouse's HTTP interface runs it, in one of two modes.
 *
 * Read-only (the analysts' port). The embedded engine is one per process and shared with the
 * service, but each chDB connection (`Session`) carries its own settings. So every analyst query gets
 * two fresh connections to the same data directory: one that checks the query, and one that runs it
 * after `SET`ting the caller's parameters and allowed settings, then our caps, then `readonly = 1` last
 * (which the engine does not let anyone undo). Nothing set there can reach the service's connection,
 * and nothing the service sets reaches analysts.
 *
 * The caller's settings and formats are checked against exact allowlists (sandbox.ts) before any is
 * set: the embedded engine does not confine the paths in settings such as `format_template_row` or
 * `output_format_schema` to a user files directory, so a prefix rule would read and write files. What
 * `readonly = 1` does not refuse in the embedded engine, the check does: more than one statement (the
 * embedded engine runs them all), `INTO OUTFILE`, statements other than SELECT / EXPLAIN / SHOW /
 * DESCRIBE / EXISTS (`KILL QUERY` passes readonly), table functions other than local generators,
 * `SETTINGS` clauses, system tables not listed, and the functions that read files or load models. The
 * check parses with the engine itself (`formatQuery`, `EXPLAIN AST`), and the statement run is the
 * engine's own formatting of the query, so what was checked is what runs.
 *
 * Writable (`npm run clickhouse:serve`, the stand-in for a ClickHouse server in development and
 * tests). Each request gets one fresh connection, so its settings last for that request only, as on a
 * server; it runs the caller's text as sent (an insert's rows after its statement), once the engine's
 * parser has found one statement in it, since a server refuses several where the embedded engine
 * would run them all, and none of it names a file, a URL or a schema (sandbox.ts).
 */
export interface AnalyticsCaps {
  maxExecutionSeconds: number
  maxMemoryBytes: number
  maxResultRows: number
  maxResultBytes: number
  maxThreads: number
  maxConcurrentQueries: number
  /** How long past max_execution_time a query may run before its client is answered TIMEOUT_EXCEEDED (default 10 s). */
  answerGraceMs?: number
}

export interface AnalyticsQuery {
  /** The statement: the `query` URL parameter, or else the body. */
  sql: string
  /** The body when the statement came in the URL: an insert's rows (read-only mode appends it to the statement). */
  data?: string | undefined
  /** The `database` URL parameter or `X-ClickHouse-Database` header. */
  database?: string | undefined
  /** GET requests run with `readonly = 2` on a server, whatever the mode. */
  method: 'GET' | 'POST'
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

/** What the engine lets a query do: read under caps (the analysts' port), or anything (a server's stand-in). */
export type EngineAccess = { writable: false; caps: AnalyticsCaps } | { writable: true }

/** An engine error in ClickHouse's shape (code, type, message), as the HTTP interface reports it. */
export class AnalyticsError extends Error {
  constructor (readonly code: number, readonly type: string, message: string) {
    super(message)
  }
}

/** Settings a client may lower but never raise past our cap. */
const CAPPED: Record<string, Exclude<keyof AnalyticsCaps, 'answerGraceMs'>> = {
  max_execution_time: 'maxExecutionSeconds',
  max_memory_usage: 'maxMemoryBytes',
  max_result_rows: 'maxResultRows',
  max_result_bytes: 'maxResultBytes',
  max_threads: 'maxThreads',
}
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** The largest block an analyst may ask for: 16 × the engine's default, so one block's work stays bounded. */
const MAX_BLOCK_SIZE = 1_048_576

/**
 * Output formats that write every column's name on every row (lower case). The result caps count
 * the engine's blocks, not the output, which the engine builds whole in the service's memory: a
 * column named by 10,000 characters made 10 KB of every 8-byte row.
 */
const NAMES_ON_EVERY_ROW = new Set([
  'json', 'jsonstrings', 'jsoneachrow', 'jsonlines', 'ndjson', 'jsonl', 'jsonstringseachrow', 'jsoneachrowwithprogress',
  'jsonstringseachrowwithprogress', 'jsonobjecteachrow', 'prettyjsoneachrow', 'prettyjsonlines', 'prettyndjson', 'xml', 'vertical', 'tskv', 'bsoneachrow',
])
/** The engine's default `output_format_pretty_max_rows`. */
const PRETTY_ROWS = 1000
/** What a column's name costs a row of those formats beyond its characters (quotes, colon, indentation). */
const NAME_OVERHEAD = 8
/** The widest a Pretty format pads a value (its capped `output_format_pretty_max_column_pad_width`) and its borders. */
const PRETTY_CELL = 253

/**
 * How many rows a result may have so that its output stays within `budget` bytes beyond its values:
 * its column names on every row (NAMES_ON_EVERY_ROW) or its cells padded (the Pretty family). Null
 * when the format adds nothing per column.
 */
export function rowsWithinOutput (format: string, names: string[], budget: number): { rows: number; pretty: boolean } | null {
  if (!growsPerColumn(format)) return null
  const f = format.toLowerCase()
  if (NAMES_ON_EVERY_ROW.has(f)) {
    const perRow = names.reduce((n, name) => n + Buffer.byteLength(name) + NAME_OVERHEAD, 0)
    return { rows: Math.max(1, Math.floor(budget / Math.max(1, perRow))), pretty: false }
  }
  return { rows: Math.max(1, Math.floor(budget / Math.max(1, names.length * PRETTY_CELL))), pretty: true }
}

/** Whether a format's output grows with its columns beyond their values: names on every row, or padded cells. */
function growsPerColumn (format: string): boolean {
  const f = format.toLowerCase()
  return NAMES_ON_EVERY_ROW.has(f) || f.startsWith('pretty')
}
/** Room for the statements that set a request's parameters: its URL (1 MiB at most), escaped. */
const PARAMETERS_QUERY_SIZE = 4 * 1024 * 1024
/** The largest query an analyst may send, in bytes: a server's default `max_query_size`. */
export const ANALYST_QUERY_SIZE = 262_144
/**
 * The limit of the port's own statements about a query (its formatting, EXPLAIN, the run of its
 * formatted text): the query quoted in them, or formatted, is longer than as sent.
 */
const CHECKS_QUERY_SIZE = 4 * ANALYST_QUERY_SIZE

function literal (s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

/** Maps a chDB error (`Code: N. DB::Exception: … (TYPE)`) to an AnalyticsError. */
function toAnalyticsError (err: unknown): AnalyticsError {
  if (err instanceof AnalyticsError) return err
  if (err instanceof SandboxRefusal) return refuse(err.message)
  const message = err instanceof Error ? err.message : String(err)
  const m = /Code: (\d+)\. (?:.*DB::Exception: )?(.*?)\s*\(([A-Z0-9_]{3,})\)(?: \(version [^)]*\))?[.\s]*$/s.exec(message)
  // The HTTP interface writes the message followed by `. (TYPE)`, as a server does: without its own final period.
  if (m) return new AnalyticsError(Number(m[1]), m[3]!, m[2]!.replace(/^Code: \d+\. DB::Exception: /, '').trim().replace(/\.$/, ''))
  return new AnalyticsError(1001, 'STD_EXCEPTION', message)
}

/** Whether a request's settings turn the engine's analyzer off. */
function analyzerOff (settings: Record<string, string>): boolean {
  return ['enable_analyzer', 'allow_experimental_analyzer'].some((name) => name in settings && /^\s*(0|false)\s*$/i.test(settings[name]!))
}

/** The answer to a query still computing past its time limit and grace (execute's own timer). */
const timeoutExceeded = () => new AnalyticsError(159, 'TIMEOUT_EXCEEDED', 'Timeout exceeded: the query ran past the analysts\' time limit')

function refuse (message: string): AnalyticsError {
  return new AnalyticsError(164, 'READONLY', message)
}

/** Runs a sandbox check, its refusal as ClickHouse's READONLY error. */
function sandboxed<T> (check: () => T): T {
  try {
    return check()
  } catch (err) {
    throw toAnalyticsError(err)
  }
}

type SessionClass = typeof Session

/** A statement as the engine's parser reads it: its formatted text (without FORMAT) and output format. */
interface ParsedStatement {
  statement: string
  format: string
}

/**
 * Leads the text of every statement the port runs, so that shutdown can cancel them by it
 * (`KILL QUERY`, whose own text starts otherwise) and leave the service's own queries alone.
 */
const RUN_MARKER = '/* analytics-sql run */'

function backquoted (name: string): string {
  return `\`${name.replace(/\\/g, '\\\\').replace(/`/g, '\\`')}\``
}

export class AnalyticsEngine {
  private active = 0
  private readonly inFlight = new Set<Promise<unknown>>()
  private closed = false

  /** Queries running now. */
  get running (): number {
    return this.active
  }

  private constructor (
    private readonly SessionCtor: SessionClass,
    private readonly path: string,
    readonly access: EngineAccess,
    /** Held open for the engine's life: the data directory stays loaded between queries. */
    private readonly keeper: Session,
    /** The engine's table functions, which the checks refuse wherever they appear (sandbox.ts). */
    private readonly tableFunctions: TableFunctionNames,
  ) {}

  /**
   * Opens the engine whose data lives at `path` (chdb is loaded here, only in embedded mode); fails
   * when the directory cannot be opened (another process owns it).
   */
  static async open (path: string, access: EngineAccess): Promise<AnalyticsEngine> {
    const chdb = await import('chdb')
    const keeper = new chdb.Session(path)
    const listed = await AnalyticsEngine.runOn(keeper,
      '/* svc:analytics_table_functions */ SELECT lower(name) FROM system.table_functions WHERE lower(name) NOT IN (SELECT lower(name) FROM system.functions)')
    const tableOnly = new Set(listed.split('\n').map((n) => n.trim()).filter(Boolean))
    return new AnalyticsEngine(chdb.Session, path, access, keeper, { tableOnly })
  }

  /** Runs one query; throws AnalyticsError with the engine's code and type. */
  async run (query: AnalyticsQuery): Promise<AnalyticsResult> {
    if (this.closed) throw new AnalyticsError(210, 'NETWORK_ERROR', 'the service is shutting down')
    const cap = this.access.writable ? Infinity : this.access.caps.maxConcurrentQueries
    if (this.active >= cap) {
      throw new AnalyticsError(202, 'TOO_MANY_SIMULTANEOUS_QUERIES', `Too many simultaneous queries. Maximum: ${cap}`)
    }
    this.active++
    // A query answered as timed out computes on until the engine stops it (max_execution_time, or
    // shutdown's KILL QUERY). Its slot (and shutdown's wait) is held until the engine's own
    // computation ends, not until the client is answered, so the cap on concurrent queries is a cap
    // on what the engine runs.
    const computing: Array<Promise<unknown>> = []
    const work = this.access.writable ? this.executeWritable(query) : this.executeReadonly(query, this.access.caps, computing)
    const held = work.then(() => {}, () => {}).then(() => Promise.allSettled(computing))
    this.inFlight.add(held)
    void held.then(() => {
      this.inFlight.delete(held)
      this.active--
    })
    return work
  }

  /**
   * `SET param_…` statements for the query's parameters. A server takes them from the URL (up to 1 MiB)
   * outside max_query_size, which limits the query only; here each is a statement the engine parses,
   * so the limit is lifted while they run and put back after.
   */
  private static paramStatements (query: AnalyticsQuery): string[] {
    const params = Object.entries(query.params).map(([name, value]) => {
      if (!NAME.test(name)) throw new AnalyticsError(457, 'BAD_QUERY_PARAMETER', `Invalid query parameter name: ${name}`)
      return `SET param_${name} = ${literal(value)}`
    })
    return params.length ? [`SET max_query_size = ${PARAMETERS_QUERY_SIZE}`, ...params, 'SET max_query_size = DEFAULT'] : []
  }

  /**
   * A read-only connection's setup: the query's parameters, the caller's allowed settings, our caps
   * (a caller may lower them), then `readonly = 1`. The connection that checks a query gets it with no
   * settings of the caller's: the check may compute too (the analyzer runs scalar subqueries).
   */
  private static readonlySetup (query: AnalyticsQuery, caps: AnalyticsCaps): string {
    const statements = AnalyticsEngine.paramStatements(query)
    const chosen: Record<string, string> = {}
    for (const [name, value] of Object.entries(query.settings)) {
      if (!NAME.test(name)) throw new AnalyticsError(115, 'UNKNOWN_SETTING', `Unknown setting ${name}`)
      if (name === 'readonly') continue
      const cap = CAPPED[name]
      if (cap) {
        const asked = Number(value)
        if (!Number.isFinite(asked) || asked < 0) throw new AnalyticsError(72, 'CANNOT_PARSE_NUMBER', `Cannot parse ${name} = ${value}`)
        // The engine reads 0 as no limit: a value that would reach it as 0 (a fraction of a unit,
        // under a millisecond of time) is no lower cap, and the cap applies.
        const lowered = cap === 'maxExecutionSeconds' ? Math.floor(asked * 1000) / 1000 : Math.floor(asked)
        if (lowered > 0 && lowered < caps[cap]) chosen[name] = String(lowered)
        continue
      }
      sandboxed(() => checkAnalystSetting(name, value))
      if (name === 'max_block_size' && !(/^\s*\d+\s*$/.test(value) && Number(value) >= 1 && Number(value) <= MAX_BLOCK_SIZE)) {
        throw refuse(`max_block_size must be a whole number from 1 to ${MAX_BLOCK_SIZE} on the analysts' port (got ${value})`)
      }
      chosen[name] = value
    }
    for (const [name, value] of Object.entries(chosen)) statements.push(`SET ${name} = ${literal(value)}`)
    statements.push(
      `SET max_query_size = ${CHECKS_QUERY_SIZE}`,
      `SET max_execution_time = ${chosen.max_execution_time ?? caps.maxExecutionSeconds}`,
      `SET max_memory_usage = ${chosen.max_memory_usage ?? caps.maxMemoryBytes}`,
      `SET max_result_rows = ${chosen.max_result_rows ?? caps.maxResultRows}`,
      `SET max_result_bytes = ${chosen.max_result_bytes ?? caps.maxResultBytes}`,
      `SET max_threads = ${chosen.max_threads ?? caps.maxThreads}`,
      "SET result_overflow_mode = 'throw'",
      "SET timeout_overflow_mode = 'throw'",
      'SET allow_introspection_functions = 0',
    )
    statements.push('SET readonly = 1')
    return statements.join('; ')
  }

  /** A server's setup of one request: its database, parameters and settings, and readonly = 2 for a GET. */
  private static writableSetup (query: AnalyticsQuery): string {
    const statements = query.database ? [`USE ${backquoted(query.database)}`] : []
    statements.push(...AnalyticsEngine.paramStatements(query))
    for (const [name, value] of Object.entries(query.settings)) {
      if (!NAME.test(name)) throw new AnalyticsError(115, 'UNKNOWN_SETTING', `Unknown setting ${name}`)
      sandboxed(() => checkServeSetting(name))
      statements.push(`SET ${name} = ${literal(value)}`)
    }
    if (query.method === 'GET' && Number(query.settings.readonly ?? 0) === 0) statements.push('SET readonly = 2')
    return statements.join('; ')
  }

  private static async runOn (session: Session, sql: string): Promise<string> {
    try {
      return (await session.queryAsync(sql, { format: 'TSVRaw' })).text()
    } catch (err) {
      throw toAnalyticsError(err)
    }
  }

  /**
   * Parses the statement with the engine (a syntax error, or more than one statement, is the engine's
   * SYNTAX_ERROR); the output format is its FORMAT clause's, else the default (an insert's FORMAT
   * names its input).
   */
  private static async parse (session: Session, sql: string, defaultFormat: string): Promise<ParsedStatement> {
    let formatted: string
    try {
      formatted = (await AnalyticsEngine.runOn(session, `SELECT formatQuery(${literal(sql)})`)).trim()
    } catch (err) {
      // The engine names the statement it ran, which quotes the query: the analyst's own is enough.
      if (!(err instanceof AnalyticsError)) throw err
      throw new AnalyticsError(err.code, err.type, err.message.replace(/:? In scope SELECT formatQuery\([\s\S]*$/, ''))
    }
    if (!formatted) throw new AnalyticsError(62, 'SYNTAX_ERROR', 'Empty query')
    const withFormat = /\nFORMAT (\w+)$/.exec(formatted)
    if (!withFormat || /^INSERT\b/.test(formatted)) return { statement: formatted, format: defaultFormat }
    return { statement: formatted.slice(0, withFormat.index), format: withFormat[1]! }
  }

  /**
   * Checks a read-only query (docs/analysts.md#what-analysts-can-set); returns the statement to run
   * and its output format. `EXISTS` of a name that is no table of the service is answered 0 without
   * asking the engine, which would answer whether a file of that name exists.
   */
  private static async check (session: Session, sql: string, defaultFormat: string, tableFunctions: TableFunctionNames, settings: Record<string, string>): Promise<ParsedStatement> {
    const parsed = await AnalyticsEngine.parse(session, sql, defaultFormat)
    // The format first: EXPLAIN AST runs nothing, but a refusal should name what was asked for.
    const format = sandboxed(() => analystFormat(parsed.format))
    const ast = await AnalyticsEngine.runOn(session, `EXPLAIN AST ${parsed.statement}`).catch((err: unknown) => {
      // The engine applies a statement's own SETTINGS clause while it explains it, and refuses a
      // change under readonly before the check below can say what to do instead.
      const setting = err instanceof AnalyticsError && err.code === 164 ? /^Cannot modify '(\w+)' setting in readonly mode/.exec(err.message)?.[1] : undefined
      throw setting ? refuse(`Setting ${setting} is not allowed in a SETTINGS clause: send allowed settings as URL parameters`) : err
    })
    sandboxed(() => checkAnalystStatement(parsed.statement, ast, tableFunctions))
    const tables = await AnalyticsEngine.refuseFilesAsTables(session, parsed.statement, ast, true, analyzerOff(settings), true)
    return { statement: tables === 'absent' ? 'SELECT toUInt8(0) AS result' : parsed.statement, format }
  }

  /**
   * Makes sure every name of `default` a statement reads as a table is a table of the service: the
   * embedded engine's `default` database reads a file of the process's working directory as a table
   * when no table has its name, even under `readonly = 1` inside a subquery. A name that is no table is
   * answered as a server answers one (UNKNOWN_TABLE), whether or not a file has that name; `EXISTS` of
   * one is 'absent'. A name the statement defines itself (`WITH t AS (…)`) is the one case where a
   * name that is no table may run: the engine's analyzer resolves it, and any reference it resolves to
   * `default` rather than to the definition is refused, so a reference outside the definition's scope
   * cannot reach a file. The analyzer decides, so with it turned off such a statement is refused.
   */
  private static async refuseFilesAsTables (session: Session, statement: string, ast: string, unqualifiedIsDefault: boolean, analyzerOff: boolean, readonly: boolean): Promise<'run' | 'absent'> {
    const names = defaultTableNames(statement, ast, unqualifiedIsDefault)
    if (!names.length) return 'run'
    const listed = await AnalyticsEngine.runOn(session,
      `/* svc:tables_exist */ SELECT name FROM system.tables WHERE database = 'default' AND name IN (${names.map(literal).join(', ')})`)
    const existing = new Set(listed.split('\n').filter(Boolean))
    const missing = names.filter((name) => !existing.has(name))
    if (!missing.length) return 'run'
    const unknown = (name: string) => new AnalyticsError(60, 'UNKNOWN_TABLE', `Table default.${name} does not exist`)
    const kind = /^\w+/.exec(ast)?.[0] ?? ''
    if (/^Exists(Table|View|Dictionary)Query$/.test(kind)) return 'absent'
    // EXPLAIN's own lines come first; the statement explained follows.
    const query = kind === 'Explain' ? statement.replace(/^(EXPLAIN\b[^\n]*\n)+/, '') : statement
    if (!/^(SelectWithUnionQuery|SelectIntersectExceptQuery|Explain)$/.test(kind) || !/^(SELECT|WITH)\b/.test(query)) throw unknown(missing[0]!)
    if (analyzerOff) {
      throw new AnalyticsError(60, 'UNKNOWN_TABLE', `Table default.${missing[0]} does not exist (a query naming its own WITH … AS (subquery) runs with the analyzer on)`)
    }
    let tree: string
    try {
      tree = await AnalyticsEngine.runOn(session, `EXPLAIN QUERY TREE ${query}`)
    } catch (err) {
      // Under readonly the engine refuses a file as a table (READONLY) before reading it, where it
      // answers a name nothing has as an unknown table or identifier (`x IN name`): all of them are
      // the same UNKNOWN_TABLE here, so the answer never tells whether a file has the name. Any other
      // error is the query's own. A writable connection reads the file, and its error may quote it.
      const error = toAnalyticsError(err)
      const named = missing.some((name) => error.message.includes(`identifier \`${name}\``) || error.message.includes(`identifier \`default.${name}\``))
      if (!readonly || error.code === 60 || error.code === 164 || named) throw unknown(missing[0]!)
      throw error
    }
    for (const name of missing) {
      if (tree.includes(`table_name: default.${name}\n`) || tree.includes(`table_name: default.${name},`)) throw unknown(name)
    }
    return 'run'
  }

  /**
   * Checks a statement for the writable stand-in: nothing that names a file, a URL or a schema, and
   * every table of `default` it names exists (else the engine would read a file by that name), as
   * a server answers a missing one (UNKNOWN_TABLE).
   */
  private static async checkWritable (session: Session, parsed: ParsedStatement, tableFunctions: TableFunctionNames, database: string | undefined, settings: Record<string, string>): Promise<'run' | 'absent'> {
    sandboxed(() => checkServeFormat(parsed.format))
    const ast = await AnalyticsEngine.runOn(session, `EXPLAIN AST ${parsed.statement}`)
    sandboxed(() => checkServeStatement(parsed.statement, ast, tableFunctions))
    return AnalyticsEngine.refuseFilesAsTables(session, parsed.statement, ast, !database || database === 'default', analyzerOff(settings), false)
  }

  /**
   * Runs a statement; with `timeoutMs`, answers TIMEOUT_EXCEEDED after it while the engine's query,
   * which cannot be stopped, computes on: its completion is put in `computing`.
   */
  private static async execute (session: Session, sql: string, format: string, timeoutMs?: number, computing?: Array<Promise<unknown>>): Promise<AnalyticsResult> {
    const started = Date.now()
    try {
      const native = session.queryAsync(`${RUN_MARKER}\n${sql}`, { format })
      computing?.push(native.catch(() => {}))
      let timer: NodeJS.Timeout | undefined
      const timedOut = timeoutMs === undefined
        ? null
        : new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(timeoutExceeded()), timeoutMs)
        })
      const result = await (timedOut ? Promise.race([native, timedOut]) : native).finally(() => clearTimeout(timer))
      const body = Buffer.from(result.bytes())
      return { body, format, rows: result.rowsRead ?? 0, bytes: result.bytesRead ?? 0, elapsedMs: Date.now() - started }
    } catch (err) {
      const error = toAnalyticsError(err)
      if (error.code === 394) throw new AnalyticsError(394, error.type, 'Query was cancelled: the service is shutting down')
      throw error
    }
  }

  private async executeReadonly (query: AnalyticsQuery, caps: AnalyticsCaps, computing: Array<Promise<unknown>>): Promise<AnalyticsResult> {
    if (query.database && query.database !== 'default') {
      // `system` exists, but is no database to work in here: its allowed tables are named in full.
      throw new AnalyticsError(81, 'UNKNOWN_DATABASE', query.database === 'system'
        ? 'Database system cannot be the current database on the analysts\' port: the service\'s tables are in default, and the system tables allowed are read as system.<name> (docs/analysts.md)'
        : `Database ${query.database} does not exist (the service's tables are in default)`)
    }
    const sql = [query.sql, query.data ?? ''].filter((s) => s.trim()).join('\n')
    if (Buffer.byteLength(sql) > ANALYST_QUERY_SIZE) {
      throw new AnalyticsError(62, 'SYNTAX_ERROR', `Max query size exceeded: the analysts' port takes a query of at most ${ANALYST_QUERY_SIZE} bytes (this one has ${Buffer.byteLength(sql)}); pass long lists as query parameters ({name:Array(String)})`)
    }
    // The settings asked for are checked first, so a refusal names the setting rather than its format.
    const runnerSetup = AnalyticsEngine.readonlySetup(query, caps)
    const guard = new this.SessionCtor(this.path)
    let runner: Session | undefined
    try {
      sandboxed(() => refuseControlCharactersInParameters(sql, query.params))
      await AnalyticsEngine.runOn(guard, AnalyticsEngine.readonlySetup({ ...query, settings: {} }, caps))
      const { statement, format } = await AnalyticsEngine.check(guard, sql, query.defaultFormat, this.tableFunctions, query.settings)
      // A format that writes names on every row, or pads cells, gets fewer rows: its output, not only
      // its blocks, stays within the result's bytes.
      const shape = await AnalyticsEngine.outputLimit(guard, statement, format, caps.maxResultBytes)
      const setup = shape === null
        ? runnerSetup
        : shape.pretty
          ? AnalyticsEngine.readonlySetup({ ...query, settings: { ...query.settings, output_format_pretty_max_rows: String(Math.min(shape.rows, Number(query.settings.output_format_pretty_max_rows ?? PRETTY_ROWS))) } }, caps)
          : AnalyticsEngine.readonlySetup(query, { ...caps, maxResultRows: Math.min(caps.maxResultRows, shape.rows) })
      runner = new this.SessionCtor(this.path)
      await AnalyticsEngine.runOn(runner, setup)
      // The engine stops the query at max_execution_time; the timeout only answers the client if it did not.
      try {
        return await AnalyticsEngine.execute(runner, statement, format, caps.maxExecutionSeconds * 1000 + (caps.answerGraceMs ?? 10_000), computing)
      } catch (err) {
        if (shape && !shape.pretty && shape.rows < caps.maxResultRows && err instanceof AnalyticsError && err.code === 396) {
          throw new AnalyticsError(396, err.type, `${err.message}: in ${format} every row repeats the column names, so a result may have at most ${shape.rows} rows here (ANALYTICS_MAX_RESULT_BYTES over the names' bytes); shorter names or a format without them (TSV, CSV, JSONCompact…) allow more`)
        }
        throw err
      }
    } finally {
      guard.close()
      runner?.close()
    }
  }

  /**
   * The row limit a SELECT's output format needs (rowsWithinOutput), from the names of the columns it
   * yields (`DESCRIBE`, which plans the query without running it). Null for other statements and
   * formats, and when the engine cannot describe it (the query then fails or runs as it would).
   */
  private static async outputLimit (session: Session, statement: string, format: string, budget: number): Promise<{ rows: number; pretty: boolean } | null> {
    if (!/^(?:SELECT|WITH|\()/i.test(statement.trimStart()) || !growsPerColumn(format)) return null
    let described: string
    try {
      described = await AnalyticsEngine.runOn(session, `DESCRIBE (${statement}) FORMAT JSONCompactEachRow`)
    } catch {
      return null
    }
    const names = described.split('\n').filter(Boolean).map((line) => String((JSON.parse(line) as unknown[])[0]))
    return rowsWithinOutput(format, names, budget)
  }

  private async executeWritable (query: AnalyticsQuery): Promise<AnalyticsResult> {
    const session = new this.SessionCtor(this.path)
    try {
      const setup = AnalyticsEngine.writableSetup(query)
      if (setup) await AnalyticsEngine.runOn(session, setup)
      const parsed = await AnalyticsEngine.parse(session, query.sql, query.defaultFormat)
      const tables = await AnalyticsEngine.checkWritable(session, parsed, this.tableFunctions, query.database, query.settings)
      const { format } = parsed
      if (tables === 'absent') return await AnalyticsEngine.execute(session, 'SELECT toUInt8(0) AS result', format)
      // The text as sent, not its formatting: formatQuery drops an insert's inline rows (VALUES …).
      return await AnalyticsEngine.execute(session, query.data === undefined ? query.sql : `${query.sql}\n${query.data}`, format)
    } finally {
      session.close()
    }
  }

  /**
   * Refuses new queries and cancels those running, as a server cancels its queries when it stops:
   * an analyst's query may be allowed minutes (ANALYTICS_MAX_EXECUTION_SECONDS), longer than shutdown
   * may take. A query whose checks were under way when the first cancel went out is cancelled by the
   * next one. Resolves once none runs.
   */
  async close (): Promise<void> {
    this.closed = true
    while (this.inFlight.size > 0) {
      await AnalyticsEngine.runOn(this.keeper, `KILL QUERY WHERE startsWith(query, '${RUN_MARKER}') ASYNC`).catch(() => {})
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        Promise.allSettled([...this.inFlight]),
        new Promise((resolve) => { timer = setTimeout(resolve, 250) }),
      ]).finally(() => clearTimeout(timer))
    }
    this.keeper.close()
  }
}
