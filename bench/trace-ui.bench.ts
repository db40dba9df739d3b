/**
 * A long agent run in the web UI: node --import tsx bench/trace-ui.bench.ts [--spans 10000 --runs 3 --screenshot docs/trace.png]
 * Starts the service on a fresh embedded store, sends one run of `--spans` spans through the API
 * (test/helpers/agent-run.ts: 100 agent turns each under the one before, the rest tool calls under
 * their turn; every span with model, tokens, tool, a 316-character reasoning and a 120-byte input),
 * then in headless Chromium (a fresh profile per run) opens the trace page and measures:
 *   - the API read alone (bytes, time);
 *   - first render: from following the link to the first rows of the tree drawn (read included);
 *   - expand all, collapse all: from the click to the next frame drawn with every row in place;
 *   - scrolling the expanded tree from top to bottom a window at a time: the time to each next frame;
 *   - long tasks (over 50 ms, the browser's PerformanceObserver) during each of those.
 */
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { launchChromium } from '../test/helpers/browser.ts'
import { agentRun } from '../test/helpers/agent-run.ts'
import { benchDatabaseUrl, deleteRedisKeys, dropDatabase, serviceArgs, TS_LOADER_ARGS, waitForUp } from './bench-support.ts'

const { values } = parseArgs({
  options: {
    spans: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '3' },
    screenshot: { type: 'string' },
  },
})
const spans = Number(values.spans)
const root = fileURLToPath(new URL('..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-trace-ui-'))
const user = `trace-ui-${randomBytes(4).toString('hex')}`
const redisPrefix = `bench:${user}:`
const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: benchDatabaseUrl('agent_telemetry_trace_ui_bench'), LOG_LEVEL: 'warn', REDIS_PREFIX: redisPrefix }
const port = 4500 + Math.floor(Math.random() * 200)
const service = spawn(process.execPath, serviceArgs(), { cwd: root, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] })
const cli = (script: string, args: string[]) =>
  execFileSync(process.execPath, [...TS_LOADER_ARGS, script, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] }).toString().trim()

/** What the page records: long tasks as they happen, and a way to wait for the next drawn frame. */
function instrumentPage () {
  const w = window as unknown as { longTasks: { start: number; ms: number }[] }
  w.longTasks = []
  new PerformanceObserver((list) => { for (const e of list.getEntries()) w.longTasks.push({ start: e.startTime, ms: e.duration }) }).observe({ type: 'longtask', buffered: true })
}

interface Phase { ms: number; longTasks: number; longestMs: number; longTotalMs: number }

try {
  const base = `http://127.0.0.1:${port}`
  await waitForUp(`${base}/health`)
  cli('src/cli/user-tier.ts', [user, 'enterprise', '--burst', '1000000'])
  const token = cli('src/cli/token.ts', [user])
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const { secret } = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
  const traceId = `run-${randomBytes(4).toString('hex')}`
  const run = agentRun({
    agentId: 'long-run', traceId, count: spans, startMs: Date.now() - 3_600_000,
    parentOf: (i) => (i === 0 ? null : i % 100 === 0 ? i - 100 : i - (i % 100)),
  })
  console.error(`sending ${spans.toLocaleString()} spans…`)
  for (let i = 0; i < run.length; i += 500) {
    const res = await fetch(`${base}/v1/events/batch`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ events: run.slice(i, i + 500) }) })
    if (res.status !== 207) throw new Error(`batch: ${res.status} ${await res.text()}`)
  }

  // The API read alone (it waits for the shipper first: read-your-writes).
  const reads: number[] = []
  let bytes = 0
  for (let i = 0; i < 4; i++) {
    const t0 = performance.now()
    const res = await fetch(`${base}/v1/me/traces/${traceId}`, { headers })
    const body = await res.arrayBuffer()
    if (!res.ok) throw new Error(`trace: ${res.status}`)
    if (i > 0) reads.push(performance.now() - t0)
    bytes = body.byteLength
  }

  const results: { first: Phase; expand: Phase; scroll: Phase & { frames: number; p50: number; max: number }; collapse: Phase; heapMb: number }[] = []
  for (let r = 0; r < Number(values.runs); r++) {
    const browser = await launchChromium({ width: 1280, height: 900 })
    try {
      const page = await browser.context.newPage()
      await page.addInitScript(instrumentPage)
      page.setDefaultTimeout(120_000)
      await page.goto(`${base}/#token=${token}`)
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
      const rows = page.locator('.waterfall .tree-row')
      const shown = page.locator('.tree-tools .muted')
      /** Runs `act` in the page and measures until `ready` holds at a drawn frame, with the long tasks meanwhile. */
      const phase = async (act: () => Promise<unknown>, ready: () => Promise<unknown>): Promise<Phase> => {
        const t0 = await page.evaluate(() => performance.now())
        await act()
        await ready()
        const m = await page.evaluate((since) => new Promise<{ end: number; tasks: { start: number; ms: number }[] }>((resolve) =>
          requestAnimationFrame(() => setTimeout(() => resolve({
            end: performance.now(),
            tasks: (window as unknown as { longTasks: { start: number; ms: number }[] }).longTasks.filter((x) => x.start >= since),
          }))),
        ), t0)
        return { ms: m.end - t0, longTasks: m.tasks.length, longestMs: Math.max(0, ...m.tasks.map((x) => x.ms)), longTotalMs: m.tasks.reduce((a, x) => a + x.ms, 0) }
      }
      const first = await phase(() => page.evaluate((h) => { location.hash = h }, `#/traces/${traceId}`), () => rows.first().waitFor())
      const expand = await phase(() => page.getByRole('button', { name: 'Expand all' }).click(),
        () => shown.filter({ hasText: `${spans.toLocaleString('en-US')} of ${spans.toLocaleString('en-US')}` }).waitFor())
      if (r === 0 && values.screenshot) {
        // Halfway down the expanded run, where indentation has stopped and rows show their depth.
        await page.locator('.tree-scroll').evaluate((el) => { el.scrollTop = el.scrollHeight / 2 })
        await rows.filter({ has: page.locator('.depth') }).nth(14).locator('button.span-name').click()
        await page.screenshot({ path: values.screenshot, fullPage: true })
        await page.locator('.tree-scroll').evaluate((el) => { el.scrollTop = 0 })
      }
      // A window at a time to the bottom, waiting for each frame: what a person dragging the scrollbar sees.
      const scroll = await page.evaluate(async () => {
        const el = document.querySelector('.tree-scroll') as HTMLElement
        const start = performance.now()
        const frames: number[] = []
        while (el.scrollTop + el.clientHeight < el.scrollHeight - 1) {
          const t0 = performance.now()
          el.scrollTop += el.clientHeight
          await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)))
          frames.push(performance.now() - t0)
        }
        const tasks = (window as unknown as { longTasks: { start: number; ms: number }[] }).longTasks.filter((x) => x.start >= start)
        return { frames, ms: performance.now() - start, tasks }
      })
      const sorted = [...scroll.frames].sort((a, b) => a - b)
      const lastRow = await rows.last().getAttribute('aria-rowindex')
      if (Number(lastRow) !== spans + 1) throw new Error(`scrolled to row ${lastRow}, not ${spans + 1}`)
      const collapse = await phase(() => page.getByRole('button', { name: 'Collapse all' }).click(), () => shown.filter({ hasText: `1 of ${spans.toLocaleString('en-US')}` }).waitFor())
      const heapMb = await page.evaluate(() => ((performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0) / 1e6)
      results.push({
        first, expand, collapse, heapMb,
        scroll: {
          ms: scroll.ms, frames: sorted.length, p50: sorted[Math.floor(sorted.length / 2)]!, max: sorted[sorted.length - 1]!,
          longTasks: scroll.tasks.length, longestMs: Math.max(0, ...scroll.tasks.map((x) => x.ms)), longTotalMs: scroll.tasks.reduce((a, x) => a + x.ms, 0),
        },
      })
    } finally {
      await browser.close()
    }
  }

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const ms = (n: number) => `${n.toFixed(0)} ms`
  const tasks = (p: Phase[]) => `${median(p.map((x) => x.longTasks))} long tasks, longest ${ms(median(p.map((x) => x.longestMs)))}, ${ms(median(p.map((x) => x.longTotalMs)))} in all`
  console.log(`\ntrace page, ${spans.toLocaleString()} spans — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — load average ${loadavg()[0]!.toFixed(1)} — ${results.length} runs (fresh profile each), medians`)
  console.log(`API read alone: ${(bytes / 1e6).toFixed(2)} MB (${(bytes / spans).toFixed(0)} bytes a span), ${ms(median(reads))}`)
  console.log(`first render (read + parse + draw): ${ms(median(results.map((x) => x.first.ms)))}; ${tasks(results.map((x) => x.first))}`)
  console.log(`expand all (${spans.toLocaleString()} rows): ${ms(median(results.map((x) => x.expand.ms)))}; ${tasks(results.map((x) => x.expand))}`)
  console.log(`scroll to the bottom, a window a step: ${results[0]!.scroll.frames} steps in ${ms(median(results.map((x) => x.scroll.ms)))}, ` +
    `a step ${ms(median(results.map((x) => x.scroll.p50)))} (slowest ${ms(median(results.map((x) => x.scroll.max)))}); ${tasks(results.map((x) => x.scroll))}`)
  console.log(`collapse all: ${ms(median(results.map((x) => x.collapse.ms)))}; ${tasks(results.map((x) => x.collapse))}`)
  console.log(`JS heap after: ${median(results.map((x) => x.heapMb)).toFixed(0)} MB`)
} finally {
  service.kill('SIGTERM')
  await new Promise((resolve) => service.once('exit', resolve))
  rmSync(dataDir, { recursive: true, force: true })
  await deleteRedisKeys(redisPrefix).catch((err) => console.error(`could not delete the Redis keys: ${err.message}`))
  await dropDatabase(env.DATABASE_URL).catch((err) => console.error(`could not drop the benchmark database: ${err.message}`))
}
