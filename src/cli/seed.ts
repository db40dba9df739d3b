/**
 * Fills one user with realistic events, straight into the event store (the service must not be
 * running on the same DATA_DIR with the embedded engine):
 *   npm run seed -- --events 1000000 [--user seed] [--agents 40] [--days 30] [--from 0] [--settle]
 * --from N continues a store already seeded with N events for the user: the new events, sessions and
 * traces are numbered after them (a store grown from 1 M to 10 M events holds what seeding 10 M would).
 * --settle, before exiting, waits for the merges and mutations running to end, then has the engine
 * merge each table as far as `OPTIMIZE TABLE` (not FINAL) does, again and again until an OPTIMIZE
 * leaves as many active parts as before it (up to 20 minutes in all, checked between OPTIMIZEs; then
 * it says so and goes on).
 * Left to its background merges, the engine picks its next merge up to a minute after the last, so a
 * store would still be merging while it is measured; OPTIMIZE merges more eagerly than the background
 * does, so what is measured next is a history whose months are merged. Prints each table's active
 * parts before and after on stderr.
 * Prints the user's subject; `npm run token -- <subject>` gives a token to read it with.
 */
import { cliArgs, exitIfDataDirInUse, usageError } from './args.ts'
import pino from 'pino'
import { loadConfig } from '../config.ts'
import { buildEventRow, type IncomingEvent } from '../domain/event-row.ts'
import { newEventId } from '../domain/ids.ts'
import { isClickHouseRequestTimeout } from '../domain/network-errors.ts'
import { openPostgres } from '../storage/postgres.ts'
import { migrateClickHouse, openClickHouse } from '../storage/clickhouse-client.ts'
import { EventsRepository } from '../storage/events-repository.ts'
import { UsersRepository } from '../storage/users-repository.ts'
import { AgentsRepository } from '../storage/agents-repository.ts'

const USAGE = 'usage: npm run seed -- --events N [--user name] [--agents N] [--days N] [--from N] [--settle]'
const { values } = cliArgs({
  options: {
    events: { type: 'string', default: '100000' },
    user: { type: 'string', default: 'seed' },
    agents: { type: 'string', default: '40' },
    days: { type: 'string', default: '30' },
    from: { type: 'string', default: '0' },
    settle: { type: 'boolean', default: false },
  },
}, { usage: USAGE, about: 'Fills one user with realistic events, straight into the event store (stop the service on the same DATA_DIR first with the embedded engine).' })
const total = Number(values.events)
const agentCount = Number(values.agents)
const days = Number(values.days)
const from = Number(values.from)
if (![total, agentCount, days].every((n) => Number.isInteger(n) && n > 0) || !Number.isInteger(from) || from < 0) {
  usageError(USAGE, '--events, --agents and --days must be whole numbers above 0, --from 0 or more')
}

const config = loadConfig()
if (!config.clickhouseUrl) exitIfDataDirInUse(config.dataDir)
const pool = await openPostgres(config.databaseUrl)
const handle = openClickHouse({ url: config.clickhouseUrl, dataDir: config.dataDir })
await migrateClickHouse(handle.client, { cluster: config.clickhouseCluster })
const events = new EventsRepository(handle.client)
const user = await new UsersRepository(pool).setTier(values.user!, 'enterprise', null)
const agentsRepo = new AgentsRepository(pool)
const agentIds: string[] = []
for (let i = 0; i < agentCount; i++) {
  const r = await agentsRepo.resolve(user.id, `seed-agent-${i}`)
  if (r.kind === 'ok') agentIds.push(r.agent.id)
}

const MODELS = ['claude-sonnet-4-5', 'claude-haiku-4-5', 'gpt-4o', 'gpt-4o-mini', 'gemini-2.5-flash', 'o4-mini', 'local-llama']
const TOOLS = ['search', 'read_file', 'write_file', 'http_get', 'sql', 'swap', 'bash']
const TYPES = ['decision', 'tool', 'tool', 'tool', 'reasoning', 'action', 'tx', 'error'] as const
const ERRORS = ['timeout after 30000ms calling tool', 'rate limit exceeded (429)', 'ENOENT: no such file /tmp/x', 'invalid JSON in tool output', 'insufficient funds for transfer']
const LEVELS = ['minimal', 'standard', 'full'] as const
let seed = 42 + from
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648)
const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!

const now = Date.now()
const span = days * 86_400_000
const sessionStart = (session: number) => now - span + Math.floor(((session * 2654435761) % 1_000_003) / 1_000_003 * (span - 600_000))
const BATCH = 50_000
/** How long --settle may take in all before it gives up and lets the seed exit. */
const SETTLE_DEADLINE_MS = 20 * 60_000
let written = 0
const started = Date.now()
const bar = (n: number) => {
  const width = 30
  const done = Math.round((n / total) * width)
  const rate = n / Math.max(1, (Date.now() - started) / 1000)
  process.stderr.write(`\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${n.toLocaleString()} / ${total.toLocaleString()} events  ${Math.round(rate).toLocaleString()}/s `)
}
while (written < total) {
  const n = Math.min(BATCH, total - written)
  const rows = []
  for (let i = 0; i < n; i++) {
    const k = from + written + i
    const type = pick(TYPES)
    const failed = type === 'error' || rand() < 0.03
    // Sessions of 25 events and traces of 8 are contiguous in time, as real agents produce them.
    const session = Math.floor(k / 25)
    const agent = agentIds[session % agentIds.length]!
    const ts = sessionStart(session) + (k % 25) * 20_000 + Math.floor(rand() * 20_000)
    const event: IncomingEvent = {
      agentId: agent,
      type,
      timestamp: ts,
      model: pick(MODELS),
      toolExecuted: type === 'tool' || type === 'tx' ? pick(TOOLS) : undefined,
      outcome: failed ? 'failed' : 'success',
      durationMs: Math.floor(rand() * 5000),
      errorMessage: failed ? pick(ERRORS) : undefined,
      reasoning: 'considered the options and chose the cheapest that meets the deadline',
      amount: type === 'tx' ? { token: pick(['SOL', 'USDC']), value: Math.round(rand() * 10000) / 100 } : undefined,
      metadata: {
        sessionId: `seed-s-${session}`,
        traceId: `seed-t-${Math.floor(k / 8)}`,
        privacyLevel: pick(LEVELS),
        tool: 'seed',
        tokensBreakdown: { inputBase: Math.floor(rand() * 4000), cacheCreation: Math.floor(rand() * 500), cacheRead: Math.floor(rand() * 8000), output: Math.floor(rand() * 1500) },
      },
    }
    rows.push(buildEventRow(event, { eventId: newEventId(ts), userId: user.id, agentId: agent, receivedAt: ts }))
  }
  await events.insert(rows)
  written += n
  bar(written)
}
process.stderr.write('\n')
const settleStarted = Date.now()
if (values.settle) await settle()
await new AgentsRepository(pool).recordActivity(new Map(agentIds.map((id) => [id, { lastSeenAt: now, framework: 'seed' }])))
await handle.release()
await pool.end()
pino().info({
  user: values.user, userId: user.id, events: total, agents: agentIds.length,
  seconds: (settleStarted - started) / 1000, settleSeconds: values.settle ? (Date.now() - settleStarted) / 1000 : undefined,
}, 'seeded')

/**
 * Waits for the merges and mutations running to end, then merges each MergeTree table of the
 * database with `OPTIMIZE TABLE` (not FINAL: the engine picks what is worth merging) until an
 * OPTIMIZE leaves as many active parts as before it; repeats the round over all tables until one
 * changes nothing (a background merge that held parts during a table's turn leaves them to the next
 * round). Gives up at the deadline.
 */
async function settle (): Promise<void> {
  const deadline = Date.now() + SETTLE_DEADLINE_MS
  const client = handle.client
  const rows = async <T>(query: string, params?: Record<string, unknown>) =>
    (await client.query({ query, query_params: params, format: 'JSONEachRow' })).json<T>()
  const activeParts = async (table: string) => Number((await rows<{ n: string }>(
    `/* svc:seed_settle */ SELECT count() AS n FROM system.parts
     WHERE active AND database = currentDatabase() AND table = {table:String}`, { table }))[0]?.n ?? 0)
  /** Until no merge or mutation of this database runs (or the deadline); a mutation that keeps failing is not waited for. */
  const idle = async () => {
    while (Date.now() < deadline) {
      const [row] = await rows<{ busy: string }>(`/* svc:seed_settle */ SELECT
        (SELECT count() FROM system.merges WHERE database = currentDatabase()) +
        (SELECT count() FROM system.mutations WHERE database = currentDatabase() AND NOT is_done AND latest_fail_reason = '') AS busy`)
      if (Number(row?.busy ?? 0) === 0) return
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
  }
  const tables = (await rows<{ name: string }>(`/* svc:seed_settle */ SELECT name FROM system.tables
    WHERE database = currentDatabase() AND engine LIKE '%MergeTree%' AND name != 'schema_migrations' ORDER BY name`)).map((r) => r.name)

  await idle()
  for (let round = 1, changed = true; changed && Date.now() < deadline; round++) {
    changed = false
    for (const table of tables) {
      const first = await activeParts(table)
      let parts = first
      while (Date.now() < deadline) {
        try {
          // Nothing worth merging is an answer here, not an error, whatever the server's profile says.
          await client.command({ query: `/* svc:seed_settle */ OPTIMIZE TABLE \`${table.replace(/`/g, '\\`')}\``, clickhouse_settings: { optimize_throw_if_noop: 0 } })
        } catch (err) {
          // A server's client gives up on a long request (its own 'Timeout error.') while the engine goes on merging.
          if (!isClickHouseRequestTimeout(err)) throw err
          await idle()
        }
        const after = await activeParts(table)
        if (after >= parts) break
        parts = after
      }
      if (parts < first) changed = true
      if (round === 1 || parts < first) process.stderr.write(`settle: ${table} ${first} → ${parts} active parts\n`)
    }
  }
  // A background merge that held parts during a table's turn may still be running.
  await idle()
  if (Date.now() >= deadline) process.stderr.write(`settle: still merging after ${SETTLE_DEADLINE_MS / 60_000} minutes; going on\n`)
}
