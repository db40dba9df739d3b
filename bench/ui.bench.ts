/**
 * Web UI first load: node --import tsx bench/ui.bench.ts [--events 50000 --runs 5 --screenshot docs/overview.png]
 * Seeds one user (npm run seed) into a fresh embedded store, sends the last hour's events through
 * the API, starts the service, then opens /#token=… in headless Chromium with a fresh profile per
 * run (nothing cached) and measures until the overview shows both charts with data. Prints the
 * JavaScript shipped (bytes as served, and gzipped for comparison) and the load times.
 */
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { launchChromium } from '../test/helpers/browser.ts'
import { serviceArgs, TS_LOADER_ARGS, waitForUp } from './bench-support.ts'

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '50000' },
    runs: { type: 'string', default: '5' },
    screenshot: { type: 'string' },
  },
})
const root = fileURLToPath(new URL('..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-ui-'))
const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: 'postgres://localhost:5432/agent_telemetry_bench', LOG_LEVEL: 'warn' }
const user = `ui-${randomBytes(4).toString('hex')}`
execFileSync(process.execPath, [...TS_LOADER_ARGS, 'src/cli/seed.ts', '--events', values.events!, '--user', user, '--agents', '12'], { cwd: root, env, stdio: 'inherit' })
const port = 4300 + Math.floor(Math.random() * 200)
const service = spawn(process.execPath, serviceArgs(), {
  cwd: root, env: { ...env, PORT: String(port), ROLES: 'api,worker', REDIS_PREFIX: `bench:${user}:` }, stdio: ['ignore', 'ignore', 'inherit'],
})
try {
  const base = `http://127.0.0.1:${port}`
  await waitForUp(`${base}/health`)
  const token = execFileSync(process.execPath, [...TS_LOADER_ARGS, 'src/cli/token.ts', user], { cwd: root, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim()
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const { secret } = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
  const now = Date.now()
  const agents = ['research-assistant', 'support-triage', 'code-reviewer']
  const models = ['claude-sonnet-4-5', 'gpt-4o', 'gemini-2.5-flash']
  const live = Array.from({ length: 400 }, (_, i) => ({
    agentId: agents[i % 3],
    type: i % 9 === 0 ? 'error' : 'tool',
    toolExecuted: ['search', 'fetch', 'run_tests'][i % 3],
    model: models[i % 3],
    outcome: i % 9 === 0 ? 'failed' : 'success',
    errorMessage: i % 9 === 0 ? 'tool timed out after 30 s' : undefined,
    durationMs: 200 + (i * 37) % 1800,
    // Busier toward now, with a wave, so the per-minute chart has a shape.
    timestamp: now - Math.floor(3_600_000 * (1 - Math.sqrt((i + 1) / 400))),
    metadata: { tokensBreakdown: { inputBase: 800 + (i * 13) % 3000, output: 100 + (i * 7) % 600 }, privacyLevel: 'standard' },
  }))
  for (let i = 0; i < live.length; i += 200) {
    const res = await fetch(`${base}/v1/events/batch`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ events: live.slice(i, i + 200) }) })
    if (res.status !== 207) throw new Error(`batch: ${res.status} ${await res.text()}`)
  }
  // Let the worker's debounced anomaly checks raise their alerts before the screenshot.
  await new Promise((resolve) => setTimeout(resolve, 4000))

  const runs: { ready: number; dcl: number; load: number; requests: number; bytes: number; js: { url: string; bytes: number }[] }[] = []
  for (let run = 0; run < Number(values.runs); run++) {
    const browser = await launchChromium({ width: 1280, height: 900 })
    try {
      const page = await browser.context.newPage()
      await page.goto(`${base}/#token=${token}`)
      await page.locator('figure.chart canvas').nth(1).waitFor({ timeout: 60_000 })
      await page.getByText(/events in the last hour/).waitFor({ timeout: 60_000 })
      const m = await page.evaluate(() => {
        const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming
        const res = performance.getEntriesByType('resource') as PerformanceResourceTiming[]
        const files = [{ url: location.pathname, bytes: nav.encodedBodySize }, ...res.map((r) => ({ url: new URL(r.name).pathname, bytes: r.encodedBodySize }))]
        const api = res.filter((r) => r.name.includes('/v1/')).map((r) => ({ url: new URL(r.name).pathname + new URL(r.name).search, start: r.startTime, ms: r.duration }))
        return { ready: performance.now(), dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, files, api }
      })
      if (run === 0) for (const a of m.api) console.log(`  api ${a.url.padEnd(60)} started ${a.start.toFixed(0).padStart(5)} ms, took ${a.ms.toFixed(0).padStart(5)} ms`)
      const assets = m.files.filter((f) => !f.url.startsWith('/v1/'))
      runs.push({
        ready: m.ready,
        dcl: m.dcl,
        load: m.load,
        requests: assets.length,
        bytes: assets.reduce((a, f) => a + f.bytes, 0),
        js: assets.filter((f) => /\.m?js$/.test(f.url)),
      })
      if (run === 0 && values.screenshot) {
        await page.waitForTimeout(500)
        await page.screenshot({ path: values.screenshot, fullPage: true })
        await page.setViewportSize({ width: 390, height: 844 })
        await page.waitForTimeout(500)
        await page.screenshot({ path: values.screenshot.replace(/\.png$/, '-phone.png'), fullPage: true })
      }
    } finally {
      await browser.close()
    }
  }
  const js = runs[0]!.js
  let gz = 0
  for (const f of js) gz += gzipSync(Buffer.from(await (await fetch(base + f.url)).arrayBuffer()), { level: 9 }).length
  const median = (k: 'ready' | 'dcl' | 'load') => runs.map((r) => r[k]).sort((a, b) => a - b)[Math.floor(runs.length / 2)]!
  console.log(`\nweb UI first load — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — ${runs.length} cold runs (fresh profile each), same machine`)
  console.log(`JavaScript: ${js.length} files, ${(js.reduce((a, f) => a + f.bytes, 0) / 1024).toFixed(1)} KiB as served (uncompressed), ${(gz / 1024).toFixed(1)} KiB gzipped`)
  for (const f of js.sort((a, b) => b.bytes - a.bytes)) console.log(`  ${f.url.padEnd(34)} ${(f.bytes / 1024).toFixed(1).padStart(7)} KiB`)
  console.log(`all assets: ${runs[0]!.requests} requests, ${(runs[0]!.bytes / 1024).toFixed(1)} KiB (API responses not counted)`)
  console.log(`median: DOMContentLoaded ${median('dcl').toFixed(0)} ms, load ${median('load').toFixed(0)} ms, overview with both charts drawn ${median('ready').toFixed(0)} ms`)
} finally {
  service.kill('SIGTERM')
  await new Promise((resolve) => service.once('exit', resolve))
  rmSync(dataDir, { recursive: true, force: true })
}
