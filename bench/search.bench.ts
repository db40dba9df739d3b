/**
 * Search benchmark: `npm run bench:search [-- --events 10000000 --built-in-js 20000 --requests 200 --keep]`,
 * or on a store loaded earlier: `npm run bench:search -- --data-dir DIR --user NAME [--requests 200]`;
 * `--no-scores` leaves the score filters out of the timing (seconds each at 10 M events).
 * Loads one user's events into a fresh store (a temporary DATA_DIR and the Postgres database
 * agent_telemetry_search_bench): 40 agents, sessions of 25 contiguous events, traces of 8, over 30
 * days, with text and metadata to search: about half the events say "deadline" (a common term), one
 * in 100,000 "quetzalcoatl" (a rare term), and each carries `metadata.customer`, one of 20,000
 * values, the same for a session's events (a selective metadata filter: 1 event in 20,000).
 *
 * How it loads, and why that is fair to the reads. The first --built-in-js events (default 20,000)
 * are built in JavaScript by the ingest path's row builder (buildEventRow, as `npm run seed` does) and
 * inserted through the events repository. The rest are built by the engine itself, by the same rules
 * (each random choice a hash of the event's number), with `INSERT INTO events … SELECT … FROM
 * numbers()`: a million rows a statement instead of 50,000 rows built in JavaScript, so 10 M events
 * load in minutes rather than the 40-50 of the JavaScript path on this machine. Either way the rows
 * go into `events` as the service's inserts do: its computed columns, skip indexes, projection and
 * every materialized view see each of them. Only the building of the rows (ingest's cost, not the
 * reads') differs; the answers are checked against the same rules for both kinds of row. Then the
 * engine merges `events` and `search_facets_hourly` as `OPTIMIZE TABLE` does (background merges would,
 * later), the service starts on the store and,
 * after 3 warm-up requests per read, times every read once per round, in an order reversed every
 * other round, for --requests rounds: p50 and p95 of the wall time seen by the client, and the
 * targets' ratios (docs/api.md#search):
 *   - a rare-term search and a selective metadata filter: p95 ≤ 2 × a point read's (the slower of
 *     one session and one trace);
 *   - a common-term search's first page: p95 ≤ 2 × the unfiltered list's;
 *   - the facets over 30 days: p95 ≤ 4 × a point read's.
 * Each trace also has one numeric score `accuracy` (a spread of values, 1 trace in 100 at 0.99 or
 * more): `score.accuracy=0.99..1` on the events and traces lists is timed and its ratio to the
 * unfiltered list printed (no target yet).
 * Each answer is checked against what was loaded (how many events hold the term or the value).
 * --keep leaves the store and its database for a later --data-dir run (it says where).
 */
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { benchDatabaseUrl, deleteRedisKeys, dropDatabase, serviceArgs, TS_LOADER_ARGS, verdict, waitForUp } from './bench-support.ts'

const USAGE = 'usage: npm run bench:search -- [--events N] [--built-in-js N] [--requests N] [--keep] [--no-scores] | --data-dir DIR --user NAME [--requests N] [--no-scores]'
const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '10000000' },
    requests: { type: 'string', default: '200' },
    keep: { type: 'boolean', default: false },
    'no-scores': { type: 'boolean', default: false },
    'built-in-js': { type: 'string', default: '20000' },
    'data-dir': { type: 'string' },
    user: { type: 'string' },
  },
})
const root = fileURLToPath(new URL('..', import.meta.url))
const size = Number(values.events)
const builtInJs = Number(values['built-in-js'])
const requests = Number(values.requests)
const reuse = values['data-dir'] !== undefined
if (!Number.isInteger(size) || size < 1000 || !Number.isInteger(builtInJs) || builtInJs < 0 || !Number.isInteger(requests) || requests < 1 || (reuse && !values.user)) {
  console.error(USAGE)
  process.exit(2)
}
const user = values.user ?? `search-${randomBytes(4).toString('hex')}`
const dataDir = values['data-dir'] ?? mkdtempSync(join(tmpdir(), 'agent-telemetry-search-'))
const databaseUrl = benchDatabaseUrl('agent_telemetry_search_bench')
const redisPrefix = `bench:search-${randomBytes(4).toString('hex')}:`
const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' }
const WARM_UP = 3
const RARE = 'quetzalcoatl'
const COMMON = 'deadline'
const CUSTOMERS = 20_000
/** A customer some session of any store of 25,000 events or more has (that of session 1,000). */
const CUSTOMER = (1000 * 7919) % CUSTOMERS

/**
 * Event k's customer (each session's events share one, as a conversation's do), and whether it holds
 * the rare term: the loader's rules, for checking answers.
 */
const customerOf = (k: number) => (Math.floor(k / 25) * 7919) % CUSTOMERS
const rareAt = (k: number) => k % 100_000 === 77
/** Trace t's accuracy score: 0 to 0.999, 1 trace in 100 at 0.99 or more. */
const accuracyOf = (trace: number) => ((trace * 7919) % 1000) / 1000
const SCORE_RANGE = '0.99..1'

/** Loads `total` events for the user into the store (the service must not be running on it). */
async function load (total: number): Promise<{ seconds: number; settleSeconds: number }> {
  const { loadConfig } = await import('../src/config.ts')
  const { buildEventRow } = await import('../src/domain/event-row.ts')
  const { newEventId } = await import('../src/domain/ids.ts')
  const { openPostgres } = await import('../src/storage/postgres.ts')
  const { migrateClickHouse, openClickHouse } = await import('../src/storage/clickhouse-client.ts')
  const { EventsRepository } = await import('../src/storage/events-repository.ts')
  const { UsersRepository } = await import('../src/storage/users-repository.ts')
  const { AgentsRepository } = await import('../src/storage/agents-repository.ts')
  const config = loadConfig(env)
  const pool = await openPostgres(config.databaseUrl)
  const handle = openClickHouse({ dataDir: config.dataDir })
  try {
    await migrateClickHouse(handle.client)
    const events = new EventsRepository(handle.client)
    const owner = await new UsersRepository(pool).setTier(user, 'enterprise', null)
    const agentsRepo = new AgentsRepository(pool)
    const agentIds: string[] = []
    for (let i = 0; i < 40; i++) {
      const r = await agentsRepo.resolve(owner.id, `search-agent-${i}`)
      if (r.kind === 'ok') agentIds.push(r.agent.id)
    }
    const MODELS = ['claude-sonnet-4-5', 'claude-haiku-4-5', 'gpt-4o', 'gpt-4o-mini', 'gemini-2.5-flash', 'o4-mini', 'local-llama']
    const TOOLS = ['search', 'read_file', 'write_file', 'http_get', 'sql', 'swap', 'bash']
    const TYPES = ['decision', 'tool', 'tool', 'tool', 'reasoning', 'action', 'tx', 'error'] as const
    const ERRORS = ['timeout after 30000ms calling tool', 'rate limit exceeded (429)', 'ENOENT: no such file /tmp/x', 'invalid JSON in tool output']
    const THOUGHTS = [
      `considered the options and chose the cheapest that meets the ${COMMON}`,
      'compared two suppliers on price and delivery time',
      `the ${COMMON} is tomorrow, so the faster route wins`,
      'asked the user to confirm the shipping address',
      `checked the calendar for the ${COMMON} of the quarterly report`,
      'summarised the thread before answering',
    ]
    let seed = 42
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648)
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!
    const now = Date.now()
    const span = 30 * 86_400_000
    const sessionStart = (session: number) => now - span + Math.floor(((session * 2654435761) % 1_000_003) / 1_000_003 * (span - 600_000))
    const started = Date.now()
    const jsRows = Math.min(total, builtInJs)
    for (let written = 0; written < jsRows;) {
      const n = Math.min(50_000, jsRows - written)
      const rows = []
      for (let k = written; k < written + n; k++) {
        const type = pick(TYPES)
        const failed = type === 'error' || rand() < 0.03
        const session = Math.floor(k / 25)
        const agent = agentIds[session % agentIds.length]!
        const ts = sessionStart(session) + (k % 25) * 20_000 + Math.floor(rand() * 20_000)
        const thought = pick(THOUGHTS)
        rows.push(buildEventRow({
          agentId: agent,
          type,
          timestamp: ts,
          model: pick(MODELS),
          toolExecuted: type === 'tool' || type === 'tx' ? pick(TOOLS) : undefined,
          outcome: failed ? 'failed' : 'success',
          durationMs: Math.floor(rand() * 5000),
          errorMessage: failed ? pick(ERRORS) : undefined,
          reasoning: rareAt(k) ? `${thought}; the ${RARE} clause applies` : thought,
          input: { prompt: `order ${k % 100_000} for customer ${customerOf(k)}: book the trip`, context: { locale: pick(['en-GB', 'de-DE', 'fr-FR']) } },
          metadata: {
            sessionId: `search-s-${session}`,
            traceId: `search-t-${Math.floor(k / 8)}`,
            privacyLevel: pick(['minimal', 'standard', 'full'] as const),
            env: pick(['prod', 'prod', 'prod', 'staging', 'dev']),
            customer: `cust-${customerOf(k)}`,
            git: { branch: pick(['main', 'main', 'feature/search', 'fix/retry']) },
            tokensBreakdown: { inputBase: Math.floor(rand() * 4000), cacheCreation: 0, cacheRead: Math.floor(rand() * 8000), output: Math.floor(rand() * 1500) },
          },
        }, { eventId: newEventId(ts), userId: owner.id, agentId: agent, receivedAt: ts }))
      }
      await events.insert(rows)
      written += n
      process.stderr.write(`\r${written.toLocaleString()} / ${total.toLocaleString()} events (rows built in JS), ${Math.round(written / Math.max(1, (Date.now() - started) / 1000)).toLocaleString()}/s `)
    }
    // The rest: the same rows built by the engine (INSERT … SELECT … FROM numbers()), into `events`
    // like any insert (its computed columns, indexes, projection and every view), by the same rules;
    // each random choice is a hash of the event's number instead of the generator above.
    const prices = new Map(MODELS.map((model) => {
      const unit = (t: { inputBase: number; cacheRead: number; output: number }) => {
        const row = buildEventRow({ agentId: 'x', type: 'decision', model, metadata: { tokensBreakdown: { ...t, cacheCreation: 0 } } }, { eventId: 'evt_x', userId: 'x', agentId: 'x', receivedAt: now })
        return { cost: Number(row.cost_usd) / 1_000_000, status: row.cost_status }
      }
      const i = unit({ inputBase: 1_000_000, cacheRead: 0, output: 0 })
      return [model, { input: i.cost, cacheRead: unit({ inputBase: 0, cacheRead: 1_000_000, output: 0 }).cost, output: unit({ inputBase: 0, cacheRead: 0, output: 1_000_000 }).cost, status: i.status }]
    }))
    const list = (xs: readonly string[]) => `[${xs.map((x) => `'${x.replace(/'/g, "\\'")}'`).join(', ')}]`
    const h = (salt: number) => `cityHash64(k, ${salt})`
    const choose = (xs: readonly string[], salt: number) => `${list(xs)}[${h(salt)} % ${xs.length} + 1]`
    const ULID = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
    const bySql = `INSERT INTO events (event_id, user_id, agent_id, ts, received_at, type, outcome, model, tool_executed, tools_considered,
        duration_ms, input, reasoning, transaction, amount_token, amount_value, error_message, error_fingerprint, session_id, trace_id,
        privacy_level, cwd, git, framework_tool, tokens_input_base, tokens_cache_creation, tokens_cache_read, tokens_output,
        cost_usd, cost_status, metadata, content_hash)
      SELECT concat('evt_', arrayStringConcat(arrayMap(i -> substring('${ULID}', toUInt64(intDiv(ms, pow(32, 9 - i))) % 32 + 1, 1), range(10))),
               arrayStringConcat(arrayMap(i -> substring('${ULID}', cityHash64(k, 100 + i) % 32 + 1, 1), range(16)))) AS event_id,
             {user:String}, agent, fromUnixTimestamp64Milli(ms), fromUnixTimestamp64Milli(ms), type, outcome, model, tool, [],
             ${h(5)} % 5000, input, reasoning, NULL, '', NULL, error_message,
             if(failed, lower(substring(hex(cityHash64(agent, tool, error_message)), 1, 16)), ''),
             session_id, trace_id, privacy, '', concat('{"branch":"', branch, '"}'), '', t_in, 0, t_cr, t_out,
             toDecimal64((t_in * price.1 + t_cr * price.2 + t_out * price.3), 9), price.4, metadata,
             lower(hex(SHA256(concat({user:String}, ':', toString(k)))))
      FROM (
        SELECT number AS k, intDiv(k, 25) AS session, arrayElement({agents:Array(String)}, session % ${agentIds.length} + 1) AS agent,
               toInt64({now:Int64} - {span:Int64} + floor((session * 2654435761) % 1000003 / 1000003 * ({span:Int64} - 600000))
                 + (k % 25) * 20000 + ${h(1)} % 20000) AS ms,
               ${choose(TYPES, 2)} AS type, type = 'error' OR ${h(3)} % 100 < 3 AS failed, if(failed, 'failed', 'success') AS outcome,
               ${choose(MODELS, 4)} AS model, if(type IN ('tool', 'tx'), ${choose(TOOLS, 6)}, '') AS tool,
               if(failed, ${choose(ERRORS, 7)}, '') AS error_message,
               concat(${choose(THOUGHTS, 8)}, if(k % 100000 = 77, '; the ${RARE} clause applies', '')) AS reasoning,
               (intDiv(k, 25) * 7919) % ${CUSTOMERS} AS customer,
               concat('{"prompt":"order ', toString(k % 100000), ' for customer ', toString(customer), ': book the trip","context":{"locale":"',
                 ${choose(['en-GB', 'de-DE', 'fr-FR'], 9)}, '"}}') AS input,
               concat('search-s-', toString(session)) AS session_id, concat('search-t-', toString(intDiv(k, 8))) AS trace_id,
               ${choose(['minimal', 'standard', 'full'], 10)} AS privacy, ${choose(['main', 'main', 'feature/search', 'fix/retry'], 11)} AS branch,
               ${h(12)} % 4000 AS t_in, ${h(13)} % 8000 AS t_cr, ${h(14)} % 1500 AS t_out,
               mapFromArrays(${list(MODELS)}, [${MODELS.map((m) => { const p = prices.get(m)!; return `(${p.input}, ${p.cacheRead}, ${p.output}, '${p.status}')` }).join(', ')}])[model] AS price,
               concat('{"sessionId":"', session_id, '","traceId":"', trace_id, '","privacyLevel":"', privacy, '","env":"',
                 ${choose(['prod', 'prod', 'prod', 'staging', 'dev'], 15)}, '","customer":"cust-', toString(customer), '","git":{"branch":"', branch,
                 '"},"tokensBreakdown":{"inputBase":', toString(t_in), ',"cacheCreation":0,"cacheRead":', toString(t_cr), ',"output":', toString(t_out), '}}') AS metadata
        FROM numbers({from:UInt64}, {n:UInt64}))`
    for (let written = jsRows; written < total;) {
      const n = Math.min(1_000_000, total - written)
      await handle.client.command({
        query: `/* svc:bench_load */ ${bySql}`,
        query_params: { user: owner.id, agents: agentIds, now, span, from: written, n },
      })
      written += n
      process.stderr.write(`\r${written.toLocaleString()} / ${total.toLocaleString()} events, ${Math.round(written / Math.max(1, (Date.now() - started) / 1000)).toLocaleString()}/s `)
    }
    process.stderr.write('\n')
    // One accuracy score per trace (traces are 8 events: k / 8), of no agent, received now.
    const { buildScoreRow, newScoreRowId } = await import('../src/domain/score-row.ts')
    const { ScoresRepository } = await import('../src/storage/scores-repository.ts')
    const scores = new ScoresRepository(handle.client)
    const traces = Math.ceil(total / 8)
    for (let written = 0; written < traces;) {
      const n = Math.min(50_000, traces - written)
      const rows = []
      for (let t = written; t < written + n; t++) {
        rows.push(buildScoreRow({ traceId: `search-t-${t}`, name: 'accuracy', value: accuracyOf(t), source: 'llm' }, { rowId: newScoreRowId(), userId: owner.id, agentId: null, receivedAt: now }))
      }
      await scores.insert(rows)
      written += n
    }
    process.stderr.write(`${traces.toLocaleString()} scores\n`)
    const seconds = (Date.now() - started) / 1000
    await agentsRepo.recordActivity(new Map(agentIds.map((id) => [id, { lastSeenAt: now, framework: 'bench' }])))
    // Merged as OPTIMIZE TABLE (not FINAL) leaves it, until a round changes nothing (at most 15 minutes):
    // left to its background merges, the store would still be merging while it is measured.
    const settleStarted = Date.now()
    for (const table of ['events', 'search_facets_hourly']) {
      const parts = async () => Number((await (await handle.client.query({
        query: '/* svc:bench_settle */ SELECT count() AS n FROM system.parts WHERE active AND database = currentDatabase() AND table = {table:String}',
        query_params: { table },
        format: 'JSONEachRow',
      })).json<{ n: string }>())[0]!.n)
      let before = await parts()
      while (Date.now() - settleStarted < 15 * 60_000) {
        await handle.client.command({ query: `/* svc:bench_settle */ OPTIMIZE TABLE ${table}`, clickhouse_settings: { optimize_throw_if_noop: 0 } })
        const after = await parts()
        process.stderr.write(`settle: ${table} ${before} → ${after} active parts\n`)
        if (after >= before) break
        before = after
      }
    }
    return { seconds, settleSeconds: (Date.now() - settleStarted) / 1000 }
  } finally {
    await handle.release()
    await pool.end()
  }
}

/** The service on the store, in a child process. */
function startService (port: number) {
  const child = spawn(process.execPath, serviceArgs(), {
    cwd: root,
    env: { ...env, PORT: String(port), ANALYTICS_PORT: 'off', ROLES: 'api', ME_READS_PER_MINUTE: '1000000', REDIS_PREFIX: redisPrefix },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const exited = new Promise<never>((_resolve, reject) => child.once('exit', (code, signal) => reject(new Error(`the service exited (${signal ?? `code ${code}`})`))))
  exited.catch(() => {})
  const base = `http://127.0.0.1:${port}`
  return {
    up: Promise.race([waitForUp(`${base}/health`), exited]),
    async get (path: string, headers: Record<string, string>) {
      const res = await Promise.race([fetch(base + path, { headers }), exited])
      return { status: res.status, body: await res.text() }
    },
    async stop () {
      child.kill('SIGTERM')
      const force = setTimeout(() => child.kill('SIGKILL'), 30_000)
      await exited.catch(() => {})
      clearTimeout(force)
    },
  }
}

const READS = [
  'one session', 'one trace', 'events (unfiltered)', `q=${RARE} (rare term)`, `meta.customer=cust-${CUSTOMER} (selective)`, `q=${COMMON} (common term)`, 'facets, 30 days',
  'traces, 30 days (unfiltered)', `traces q=${COMMON}`, `traces q=${RARE}`, `events score.accuracy=${SCORE_RANGE}`, `traces score.accuracy=${SCORE_RANGE}`,
] as const
type Read = typeof READS[number]
const SCORE_READS: Read[] = [`events score.accuracy=${SCORE_RANGE}`, `traces score.accuracy=${SCORE_RANGE}`]
/** What is timed: --no-scores leaves out the score filters (seconds each at 10 M events). */
const TIMED = READS.filter((r) => !values['no-scores'] || !SCORE_READS.includes(r))

let service: ReturnType<typeof startService> | undefined
const loaded = { seconds: 0, settleSeconds: 0 }
const figures = new Map<Read, { p50: number; p95: number }>()
const load1 = { start: 0, end: 0 }
let stored = 0
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void service?.stop()
    if (!reuse && !values.keep) rmSync(dataDir, { recursive: true, force: true })
    process.exit(130)
  })
}
try {
  if (!reuse) {
    await dropDatabase(databaseUrl)
    console.error(`loading ${size.toLocaleString()} events into ${dataDir}`)
    Object.assign(loaded, await load(size))
  }
  service = startService(4300 + Math.floor(Math.random() * 200))
  await service.up
  const token = execFileSync(process.execPath, [...TS_LOADER_ARGS, 'src/cli/token.ts', user], { cwd: root, env, stdio: 'pipe' }).toString().trim()
  const headers = { authorization: `Bearer ${token}` }
  const json = async (path: string) => {
    const res = await service!.get(path, headers)
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${res.body.slice(0, 300)}`)
    return JSON.parse(res.body)
  }
  // The newest session and trace, else (a list that answers none) ones the loader's rules made.
  const listed = [(await json('/v1/me/sessions?limit=1')).sessions[0]?.sessionId, (await json('/v1/me/traces?limit=1')).traces[0]?.traceId]
  if (!listed[0] || !listed[1]) console.error(`the sessions or traces list answered none (${JSON.stringify(listed)}): timing search-s-1000 and search-t-8000`)
  const session = (listed[0] ?? 'search-s-1000') as string
  const trace = (listed[1] ?? 'search-t-8000') as string
  const paths: Record<Read, string> = {
    'one session': `/v1/me/sessions/${encodeURIComponent(session)}`,
    'one trace': `/v1/me/traces/${encodeURIComponent(trace)}`,
    'events (unfiltered)': '/v1/me/events',
    [`q=${RARE} (rare term)`]: `/v1/me/events?q=${RARE}`,
    [`meta.customer=cust-${CUSTOMER} (selective)`]: `/v1/me/events?meta.customer=cust-${CUSTOMER}`,
    [`q=${COMMON} (common term)`]: `/v1/me/events?q=${COMMON}`,
    'facets, 30 days': '/v1/me/events/facets?since=30d',
    'traces, 30 days (unfiltered)': '/v1/me/traces?since=30d',
    [`traces q=${COMMON}`]: `/v1/me/traces?since=30d&q=${COMMON}`,
    [`traces q=${RARE}`]: `/v1/me/traces?since=30d&q=${RARE}`,
    [`events score.accuracy=${SCORE_RANGE}`]: `/v1/me/events?score.accuracy=${SCORE_RANGE}`,
    [`traces score.accuracy=${SCORE_RANGE}`]: `/v1/me/traces?since=30d&score.accuracy=${SCORE_RANGE}`,
  } as Record<Read, string>

  // The answers against what was loaded: every matching event is in the first page, or the page is full.
  const facets = await json(paths['facets, 30 days'])
  stored = facets.total
  const n = reuse ? stored : size
  let rare = 0
  let customer = 0
  for (let k = 0; k < n; k++) {
    if (rareAt(k)) rare++
    if (customerOf(k) === CUSTOMER) customer++
  }
  const check = async (read: Read, expected: number, test: (e: any) => boolean) => {
    const events = (await json(paths[read])).events as any[]
    if (events.length !== Math.min(50, expected) || !events.every(test)) throw new Error(`${read}: ${events.length} events on the first page, expected ${Math.min(50, expected)} matching`)
  }
  await check(`q=${RARE} (rare term)`, rare, (e) => e.reasoning.includes(RARE))
  await check(`meta.customer=cust-${CUSTOMER} (selective)`, customer, (e) => e.metadata.customer === `cust-${CUSTOMER}`)
  await check(`q=${COMMON} (common term)`, n, (e) => e.reasoning.includes(COMMON))
  const traceNumber = (id: string) => Number(id.slice('search-t-'.length))
  for (const [read, expected] of [[`traces q=${COMMON}`, 50], [`traces q=${RARE}`, Math.min(50, rare)]] as [Read, number][]) {
    const traces = (await json(paths[read])).traces as any[]
    if (traces.length !== expected) throw new Error(`${read}: ${traces.length} traces on the first page, expected ${expected}`)
  }
  if (!values['no-scores']) {
    const scoredTraces = (await json(paths[`traces score.accuracy=${SCORE_RANGE}`])).traces as any[]
    if (scoredTraces.length !== 50 || !scoredTraces.every((x) => accuracyOf(traceNumber(x.traceId)) >= 0.99)) throw new Error('traces by score: not a full page of traces scored 0.99 or more')
    const scoredEvents = (await json(paths[`events score.accuracy=${SCORE_RANGE}`])).events as any[]
    if (scoredEvents.length !== 50 || !scoredEvents.every((e) => accuracyOf(traceNumber(e.traceId)) >= 0.99)) throw new Error('events by score: not a full page of events of traces scored 0.99 or more')
  }
  console.error(`${stored.toLocaleString()} events in the last 30 days; ${rare} hold "${RARE}", ${customer} have customer cust-${CUSTOMER}`)

  const timed = async (path: string) => {
    const t0 = performance.now()
    const res = await service!.get(path, headers)
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`)
    return performance.now() - t0
  }
  for (let w = 0; w < WARM_UP; w++) for (const read of TIMED) await timed(paths[read])
  console.error(`timing ${TIMED.length} reads, ${requests} rounds`)
  load1.start = loadavg()[0]!
  const times = new Map<Read, number[]>(TIMED.map((r) => [r, []]))
  const backward = [...TIMED].reverse()
  for (let r = 0; r < requests; r++) {
    for (const read of r % 2 === 0 ? TIMED : backward) times.get(read)!.push(await timed(paths[read]))
    if ((r + 1) % 50 === 0 && r + 1 < requests) console.error(`  ${r + 1} rounds`)
  }
  load1.end = loadavg()[0]!
  for (const [read, ms] of times) {
    ms.sort((a, b) => a - b)
    const q = (p: number) => ms[Math.min(ms.length - 1, Math.ceil(p * ms.length) - 1)]!
    figures.set(read, { p50: q(0.5), p95: q(0.95) })
  }
} finally {
  await service?.stop()
  await deleteRedisKeys(redisPrefix).catch((err) => console.error(`could not delete the Redis keys: ${err.message}`))
  if (!reuse && !values.keep) {
    rmSync(dataDir, { recursive: true, force: true })
    await dropDatabase(databaseUrl).catch((err) => console.error(`could not drop the benchmark database: ${err.message}`))
  } else if (!reuse) {
    console.error(`kept: npm run bench:search -- --data-dir ${dataDir} --user ${user}  (database agent_telemetry_search_bench)`)
  }
}

console.log(`\nsearch — ${new Date().toISOString()} — one user, ${stored.toLocaleString()} events in 30 days, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
if (!reuse) console.log(`  loaded in ${loaded.seconds.toFixed(0)} s, merged in ${loaded.settleSeconds.toFixed(0)} s`)
console.log(`  ${requests} rounds after ${WARM_UP} warm-up, each timing every read once (order reversed every other round); load average ${load1.start.toFixed(1)} → ${load1.end.toFixed(1)}`)
console.log('read'.padEnd(40) + 'p50 ms'.padStart(10) + 'p95 ms'.padStart(10))
for (const read of TIMED) console.log(read.padEnd(40) + figures.get(read)!.p50.toFixed(1).padStart(10) + figures.get(read)!.p95.toFixed(1).padStart(10))
const p95 = (read: Read) => figures.get(read)!.p95
const point = Math.max(p95('one session'), p95('one trace'))
const targets: [Read, number, number, string][] = [
  [`q=${RARE} (rare term)`, point, 2, 'a point read'],
  [`meta.customer=cust-${CUSTOMER} (selective)`, point, 2, 'a point read'],
  [`q=${COMMON} (common term)`, p95('events (unfiltered)'), 2, 'the unfiltered list'],
  ['facets, 30 days', point, 4, 'a point read'],
]
console.log(`\np95 ratios (a point read: the slower of one session and one trace, ${point.toFixed(1)} ms)`)
let pass = true
for (const [read, base, limit, against] of targets) {
  const ratio = p95(read) / base
  pass &&= ratio <= limit
  console.log(`${read.padEnd(40)}${`${ratio.toFixed(2)} ×`.padStart(10)} ${against} (target ≤ ${limit})  ${verdict(ratio <= limit)}`)
}
console.log(pass ? 'every search read within its target' : 'some search read misses its target')
const faster = Math.min(p95('one session'), p95('one trace'))
console.log(`against the faster point read (${faster.toFixed(1)} ms): ${targets.filter(([, base]) => base === point).map(([read]) => `${read.replace(/ \(.*\)$/, '')} ${(p95(read) / faster).toFixed(2)} ×`).join(', ')}`)
console.log('\ntraces under a term, p95 against the traces list unfiltered (no target)')
for (const read of [`traces q=${COMMON}`, `traces q=${RARE}`] as Read[]) {
  console.log(`${read.padEnd(40)}${`${(p95(read) / p95('traces, 30 days (unfiltered)')).toFixed(2)} ×`.padStart(10)} traces, 30 days (unfiltered)`)
}
if (!values['no-scores']) {
  console.log('\nscore filters, p95 against the same list unfiltered (no target yet)')
  for (const [read, base] of [[`events score.accuracy=${SCORE_RANGE}`, 'events (unfiltered)'], [`traces score.accuracy=${SCORE_RANGE}`, 'traces, 30 days (unfiltered)']] as [Read, Read][]) {
    console.log(`${read.padEnd(40)}${`${(p95(read) / p95(base)).toFixed(2)} ×`.padStart(10)} ${base}`)
  }
}
