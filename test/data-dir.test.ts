import t from 'tap'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ext4WithoutJournal, makeDirs, prepareDataDir, warnOfFileSystem } from '../src/data-dir.ts'

const root = mkdtempSync(join(tmpdir(), 'data-dir-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

function logger () {
  const lines: Array<[Record<string, unknown>, string]> = []
  return { lines, log: { warn: (obj: Record<string, unknown>, msg: string) => { lines.push([obj, msg]) } } as never }
}

t.test('a DATA_DIR the service creates is 0700, its missing parents too; no warning', async (t) => {
  const { lines, log } = logger()
  const dir = join(root, 'new', 'data')
  t.equal(prepareDataDir(dir, log), true)
  t.equal(statSync(dir).mode & 0o777, 0o700)
  t.equal(lines.length, 0)
})

t.test('makeDirs makes the missing levels, says whether it made any, and throws where a level cannot be made', async (t) => {
  const dir = join(root, 'made', 'a', 'b')
  t.equal(makeDirs(dir, 0o700), true)
  t.equal(statSync(join(root, 'made')).mode & 0o777, 0o700, 'a parent made has the mode too')
  t.equal(makeDirs(dir), false, 'nothing to make')
  const file = join(root, 'plain-file')
  writeFileSync(file, 'x')
  t.throws(() => makeDirs(join(file, 'sub')), { code: 'ENOTDIR' })
  if (process.platform === 'linux') t.throws(() => makeDirs('/proc/agent-telemetry-x/y'), { code: 'ENOENT' }, 'where Node\'s recursive mkdir never returns')
})

t.test('an existing DATA_DIR open to group or others gets one warn line with the fix, and is not changed', async (t) => {
  for (const mode of [0o755, 0o750, 0o705, 0o770]) {
    const { lines, log } = logger()
    const dir = join(root, `open-${mode.toString(8)}`)
    mkdirSync(dir)
    chmodSync(dir, mode)
    t.equal(prepareDataDir(dir, log), false)
    t.equal(lines.length, 1, mode.toString(8))
    t.equal(lines[0]![0].path, dir)
    t.match(lines[0]![1], `chmod 700 ${dir}`)
    t.equal(statSync(dir).mode & 0o777, mode, 'the operator\'s directory is left as it was')
  }
  const { lines, log } = logger()
  const closed = join(root, 'closed')
  mkdirSync(closed, { mode: 0o700 })
  prepareDataDir(closed, log)
  t.equal(lines.length, 0, 'a 0700 directory draws no warning')
})

/**
 * A copy of the kernel's files for ext4WithoutJournal: mounts (mount point, major:minor, type,
 * source), the ext4 file systems by kernel name, their journals, and /sys's device links.
 */
function kernelFiles (name: string, mounts: Array<{ point: string; device: string; type: string; source: string; kernelName: string; journal: boolean }>) {
  const proc = join(root, name, 'proc')
  const sys = join(root, name, 'sys')
  mkdirSync(join(proc, 'self'), { recursive: true })
  mkdirSync(join(proc, 'fs', 'jbd2'), { recursive: true })
  mkdirSync(join(sys, 'dev', 'block'), { recursive: true })
  const lines = mounts.map((m, i) => `${20 + i} 1 ${m.device} / ${m.point.replace(/ /g, '\\040')} rw,relatime shared:1 - ${m.type} ${m.source} rw`)
  writeFileSync(join(proc, 'self', 'mountinfo'), lines.join('\n') + '\n')
  for (const m of mounts) {
    symlinkSync(`../../devices/virtual/block/${m.kernelName}`, join(sys, 'dev', 'block', m.device))
    if (m.type === 'ext4') mkdirSync(join(proc, 'fs', 'ext4', m.kernelName), { recursive: true })
    if (m.journal) mkdirSync(join(proc, 'fs', 'jbd2', `${m.kernelName}-8`))
  }
  return { proc, sys }
}

t.test('ext4WithoutJournal names the ext4 file system under a directory only when it has no journal', async (t) => {
  const data = join(root, 'fs data')
  const nested = join(data, 'nested')
  mkdirSync(nested, { recursive: true })
  const rootFs = { point: '/', device: '254:0', type: 'ext4', source: '/dev/vda', kernelName: 'vda', journal: false }
  t.equal(ext4WithoutJournal(data, kernelFiles('plain', [rootFs])), 'vda', 'the root file system, no journal')
  t.equal(ext4WithoutJournal(data, kernelFiles('journaled', [{ ...rootFs, journal: true }])), undefined, 'a journal: nothing to say')
  t.equal(ext4WithoutJournal(data, kernelFiles('xfs', [{ ...rootFs, type: 'xfs' }])), undefined, 'another type')
  // The longest mount point holding the directory decides, spaces in it escaped as the kernel does;
  // the kernel's name comes from /sys (a device mapper's source is not its name).
  const mounted = kernelFiles('nested', [
    { ...rootFs, journal: true },
    { point: data, device: '253:1', type: 'ext4', source: '/dev/mapper/vg-data', kernelName: 'dm-1', journal: false },
  ])
  t.equal(ext4WithoutJournal(nested, mounted), 'dm-1')
  t.equal(ext4WithoutJournal(join(root, 'new'), mounted), undefined, 'beside the mount: the journaled root')
  const prefix = kernelFiles('prefix', [{ ...rootFs, journal: true }, { point: `${data}x`, device: '253:2', type: 'ext4', source: '/dev/vdb', kernelName: 'vdb', journal: false }])
  t.equal(ext4WithoutJournal(nested, prefix), undefined, 'a mount point that is a prefix of the path\'s name only is not its mount')
  t.equal(ext4WithoutJournal(data, { proc: join(root, 'no-proc'), sys: join(root, 'no-sys') }), undefined, 'no /proc: not Linux, nothing said')
})

t.test('the start warns once, naming the device and what to do, only for ext4 without a journal', async (t) => {
  const data = join(root, 'warned')
  mkdirSync(data)
  const rootFs = { point: '/', device: '254:0', type: 'ext4', source: '/dev/vda', kernelName: 'vda', journal: false }
  const { lines, log } = logger()
  warnOfFileSystem(data, log, kernelFiles('warn', [rootFs]))
  t.equal(lines.length, 1)
  t.same(lines[0]![0], { path: data, device: 'vda' })
  t.match(lines[0]![1], /without a journal \(vda\).*XFS/)
  const quiet = logger()
  warnOfFileSystem(data, quiet.log, kernelFiles('quiet', [{ ...rootFs, journal: true }]))
  t.equal(quiet.lines.length, 0)
})
