import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ownerRuns, processStart, takePidLock } from '../../../src/ingest/log/pid-lock.ts'
import { TS_LOADER_ARGS } from '../../helpers/ts-loader.ts'

const dir = mkdtempSync(join(tmpdir(), 'pid-lock-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' })
t.teardown(() => { sleeper.kill() })

t.test('ownerRuns: a running process, known by its start time or its command', async (t) => {
  const pid = sleeper.pid!
  const started = processStart(pid)
  t.ok(started, 'its start time is read from /proc')
  t.ok(ownerRuns(pid))
  t.ok(ownerRuns(pid, { started: started!, command: 'node' }))
  t.notOk(ownerRuns(pid, { started: '1' }), 'the pid reused by a process started at another time')
  t.notOk(ownerRuns(pid, { command: 'postgres' }), 'the pid reused by another program')
  t.notOk(ownerRuns(process.pid), 'never this process')
  t.notOk(ownerRuns(999999999), 'gone')
  t.notOk(ownerRuns(0))
})

t.test('takePidLock: taken once, refused to a live owner, a stale lock taken over, released', async (t) => {
  const path = join(dir, 'LOCK')
  const refused = (owner: number | null) => new Error(`held by ${owner}`)
  const release = takePidLock(path, refused)
  t.equal(readFileSync(path, 'utf8'), `${process.pid} ${processStart(process.pid)}`)
  release()
  t.notOk(existsSync(path))

  writeFileSync(path, `${sleeper.pid} ${processStart(sleeper.pid!)}`)
  t.throws(() => takePidLock(path, refused), new RegExp(`held by ${sleeper.pid}`))
  writeFileSync(path, `${sleeper.pid} 1`)
  takePidLock(path, refused)()
  writeFileSync(path, '999999999 1')
  takePidLock(path, refused)()
  t.notOk(existsSync(path))
})

t.test('takePidLock: a stale lock is removed by the one process taking it over, and never while another is at it', async (t) => {
  const path = join(dir, 'TAKEOVER')
  writeFileSync(path, '999999999 1') // a stale lock: its owner is gone
  mkdirSync(`${path}.takeover`) // another process taking it over, just now
  t.throws(() => takePidLock(path, (owner) => new Error(`held by ${owner}`)), /held by null/, 'not taken while another process takes it over')
  t.equal(readFileSync(path, 'utf8'), '999999999 1', 'and the lock is left to that process')
  // A takeover whose process died in it: its directory is old.
  const old = new Date(Date.now() - 60_000)
  utimesSync(`${path}.takeover`, old, old)
  const release = takePidLock(path, (owner) => new Error(`held by ${owner}`))
  t.equal(readFileSync(path, 'utf8'), `${process.pid} ${processStart(process.pid)}`, 'taken once the takeover is old')
  t.notOk(existsSync(`${path}.takeover`), 'no takeover directory left')
  release()
})

t.test('takePidLock: processes starting together over a stale lock take it once between them', async (t) => {
  const lockModule = new URL('../../../src/ingest/log/pid-lock.ts', import.meta.url).href
  // Each child waits for a start line, races for the lock, says whether it took it, then holds it a while.
  const child = `const { takePidLock } = await import(${JSON.stringify(lockModule)})
    const [path, at] = [process.argv[1], Number(process.argv[2])]
    while (Date.now() < at) {}
    try { takePidLock(path, (o) => new Error('refused ' + o)); console.log('TOOK'); await new Promise((r) => setTimeout(r, 800)) }
    catch (e) { console.log('REFUSED ' + e.message) }`
  for (let trial = 0; trial < 6; trial++) {
    const path = join(dir, `RACE${trial}`)
    writeFileSync(path, '999999999 1') // a stale lock: its owner is gone
    const at = Date.now() + 1500
    const outputs = await Promise.all(Array.from({ length: 3 }, () => new Promise<string>((resolve) => {
      const p = spawn(process.execPath, [...TS_LOADER_ARGS, '--input-type=module', '-e', child, path, String(at)], { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      p.stdout.on('data', (d) => { out += d })
      p.on('close', () => resolve(out.trim()))
    })))
    t.equal(outputs.filter((o) => o === 'TOOK').length, 1, `trial ${trial}: one of three took it (${outputs.join(', ')})`)
  }
})
