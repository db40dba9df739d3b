import t from 'tap'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { prepareDataDir } from '../src/data-dir.ts'

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
