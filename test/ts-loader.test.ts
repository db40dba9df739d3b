import t from 'tap'
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { randomId, TEST_DATA_DIR } from './helpers/env.ts'
import { TS_LOADER_ARGS } from './helpers/ts-loader.ts'

const CACHE_DIR = fileURLToPath(new URL('../node_modules/.cache/ts-loader/', import.meta.url))
const run = (script: string) => promisify(execFile)(process.execPath, [...TS_LOADER_ARGS, script], { encoding: 'utf8' })

/** The cached compilations whose text holds `marker`. */
const cachedWith = (marker: string) => readdirSync(CACHE_DIR)
  .filter((name) => name.endsWith('.js') && readFileSync(join(CACHE_DIR, name), 'utf8').includes(marker))

t.test('a module is compiled once; later processes read it from the cache, and a changed source is compiled again', async (t) => {
  const marker = randomId('marker-')
  const script = join(TEST_DATA_DIR, `${randomId('module-')}.ts`)
  writeFileSync(script, `const words: string[] = ['${marker}', 'compiled']\nconsole.log(words.join(' '))\n`)
  t.equal((await run(script)).stdout, `${marker} compiled\n`)
  const cached = cachedWith(marker)
  t.equal(cached.length, 1, 'one compilation kept')

  // What the next process runs is the cached text, not a new compilation of the source.
  writeFileSync(join(CACHE_DIR, cached[0]!), `console.log('${marker} from the cache')\n`)
  t.equal((await run(script)).stdout, `${marker} from the cache\n`)

  writeFileSync(script, `const words: string[] = ['${marker}', 'changed']\nconsole.log(words.join(' '))\n`)
  t.equal((await run(script)).stdout, `${marker} changed\n`)
  t.equal(cachedWith(marker).length, 2, 'the changed source has a compilation of its own')
})

t.test('a TypeScript module may import a sibling by its .js name; a .js file that exists wins', async (t) => {
  const dir = TEST_DATA_DIR
  const name = randomId('sibling-')
  writeFileSync(join(dir, `${name}.ts`), 'export const from: string = \'ts\'\n')
  const main = join(dir, `${randomId('main-')}.ts`)
  writeFileSync(main, `import { from } from './${name}.js'\nconsole.log(from)\n`)
  t.equal((await run(main)).stdout, 'ts\n')
  writeFileSync(join(dir, `${name}.js`), 'export const from = \'js\'\n')
  t.equal((await run(main)).stdout, 'js\n')
  writeFileSync(main, 'import { from } from \'./absent.js\'\nconsole.log(from)\n')
  await t.rejects(run(main), { code: 1, stderr: /ERR_MODULE_NOT_FOUND[\s\S]*absent\.js/ }, 'neither exists: the error names the .js asked for')
})

t.test('a stack trace points at the TypeScript source\'s line', async (t) => {
  const script = join(TEST_DATA_DIR, `${randomId('throws-')}.ts`)
  writeFileSync(script, 'interface Shape {\n  sides: number\n}\n\nconst shape: Shape = { sides: 3 }\nthrow new Error(\'sides \' + shape.sides)\n')
  await t.rejects(run(script), { code: 1, stderr: new RegExp(`${script.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:6`) })
})
