/**
 * The ingest log alone: `node --import tsx bench/ingest-log.bench.ts [--commits 2000] [--rounds 3]`.
 *
 * Appends a 530-byte line (the size of the ingestion benchmark's event) through `DiskIngestLog`,
 * `--commits` group commits of 24 appends (what a commit held under the ingestion benchmark's (b)),
 * then of one append, marking rows shipped every 100 commits as the shipper does; and, as the
 * baseline in the same run, the floor any durable log pays on this disk: the same bytes per commit
 * written by one `write` to a file opened with O_DSYNC. Prints CPU (user + system, all threads of
 * this process) per append and wall time per commit, and the log's CPU over the floor's. Its data
 * goes to a fresh temporary directory, deleted at the end.
 */
import { closeSync, constants, mkdtempSync, openSync, rmSync, write } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { DiskIngestLog } from '../src/ingest/log/disk-ingest-log.ts'
import { benchArgs } from './bench-support.ts'

const { values } = parseArgs({
  args: benchArgs(),
  options: { commits: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '3' } },
})
const commits = Number(values.commits)
const rounds = Number(values.rounds)
const line = JSON.stringify(['evt_01', 'user', 'agent', 'x'.repeat(480), 1, 2, 3])
const root = mkdtempSync(join(tmpdir(), 'agent-telemetry-log-bench-'))

interface Figures { cpuPerAppend: number; wallPerCommit: number }

async function measure (commit: () => Promise<unknown>, perCommit: number, between?: (i: number) => Promise<void>): Promise<Figures> {
  for (let i = 0; i < 200; i++) await commit()
  const cpu = process.cpuUsage()
  const start = performance.now()
  for (let i = 0; i < commits; i++) {
    await commit()
    await between?.(i)
  }
  const used = process.cpuUsage(cpu)
  return { cpuPerAppend: (used.user + used.system) / (commits * perCommit), wallPerCommit: (performance.now() - start) * 1000 / commits }
}

async function logRun (perCommit: number): Promise<Figures> {
  const log = DiskIngestLog.open({ dir: mkdtempSync(join(root, 'log-')), maxBytes: 1 << 30 })
  try {
    return await measure(() => Promise.all(Array.from({ length: perCommit }, () => log.append([line]))), perCommit,
      async (i) => { if (i % 100 === 99) await log.markShipped(log.lastPosition) })
  } finally {
    await log.close()
  }
}

async function floorRun (perCommit: number): Promise<Figures> {
  const bytes = Buffer.from(Array.from({ length: perCommit }, () => line).join('\n'))
  const fd = openSync(join(root, `floor-${perCommit}-${Math.random()}`), constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_DSYNC)
  try {
    return await measure(() => new Promise<void>((resolve, reject) => write(fd, bytes, (err) => (err ? reject(err) : resolve()))), perCommit)
  } finally {
    closeSync(fd)
  }
}

const show = (f: Figures) => `${f.cpuPerAppend.toFixed(1).padStart(7)} µs CPU an append, ${f.wallPerCommit.toFixed(0).padStart(5)} µs a commit`
try {
  for (const perCommit of [24, 1]) {
    const ratios: number[] = []
    for (let round = 1; round <= rounds; round++) {
      const floor = await floorRun(perCommit)
      const log = await logRun(perCommit)
      ratios.push(log.cpuPerAppend / floor.cpuPerAppend)
      console.log(`${perCommit} a commit, round ${round}: log ${show(log)}; O_DSYNC write ${show(floor)}; log/write CPU ${ratios.at(-1)!.toFixed(2)} ×`)
    }
    const sorted = [...ratios].sort((a, b) => a - b)
    console.log(`${perCommit} a commit: log/write CPU per append, median of ${rounds}: ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} ×`)
  }
} finally {
  rmSync(root, { recursive: true, force: true })
}
