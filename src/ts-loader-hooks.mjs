// The load hook of src/ts-loader.mjs: a .ts module's JavaScript, from the cache or compiled by
// esbuild; every other module loads as Node loads it.
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { transformSync, version as esbuildVersion } from 'esbuild'

const CACHE_DIR = fileURLToPath(new URL('../node_modules/.cache/ts-loader/', import.meta.url))
// The options are part of each cache key: the target is this Node (its import attributes survive).
const OPTIONS = {
  loader: 'ts',
  format: 'esm',
  target: `node${process.versions.node}`,
  sourcemap: 'inline',
  tsconfigRaw: { compilerOptions: { useDefineForClassFields: true, verbatimModuleSyntax: false } },
}
const OPTIONS_KEY = JSON.stringify([esbuildVersion, OPTIONS])

let cacheUsable = true
try {
  mkdirSync(CACHE_DIR, { recursive: true })
} catch {
  // A read-only install compiles each module in each process.
  cacheUsable = false
}

/** The JavaScript of the TypeScript module at `path`, whose text is `source`. */
function compile (path, source) {
  const key = createHash('sha256').update(OPTIONS_KEY).update('\0').update(path).update('\0').update(source).digest('hex')
  const cached = `${CACHE_DIR}${key}.js`
  if (cacheUsable) {
    try {
      return readFileSync(cached, 'utf8')
    } catch {
      // Not compiled yet.
    }
  }
  const { code } = transformSync(source, { ...OPTIONS, sourcefile: path })
  if (cacheUsable) {
    // Written aside and renamed: a process reading it meanwhile sees the whole file or none.
    const aside = `${cached}.${process.pid}.${Math.random().toString(36).slice(2)}`
    try {
      writeFileSync(aside, code)
      renameSync(aside, cached)
    } catch {
      // The next process compiles it again.
    }
  }
  return code
}

// A TypeScript module may name a sibling by its compiled name (`./x.js` for `./x.ts`, as the
// client's sources do for tsc): when no such .js file exists, the .ts one is meant.
function tsTwin (specifier, context) {
  return specifier.endsWith('.js') && specifier.startsWith('.') && context.parentURL?.endsWith('.ts')
    ? `${specifier.slice(0, -3)}.ts`
    : undefined
}

function isTypeScript (url) {
  return url.startsWith('file:') && url.endsWith('.ts')
}

function loaded (url) {
  const path = fileURLToPath(url)
  return { format: 'module', source: compile(path, readFileSync(path, 'utf8')), shortCircuit: true }
}

/** module.registerHooks' resolve hook. */
export function resolveSync (specifier, context, nextResolve) {
  const twin = tsTwin(specifier, context)
  if (twin === undefined) return nextResolve(specifier, context)
  try {
    return nextResolve(specifier, context)
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err
    try {
      return nextResolve(twin, context)
    } catch {
      throw err // neither exists: the error names the module asked for
    }
  }
}

/** module.register's resolve hook. */
export async function resolve (specifier, context, nextResolve) {
  const twin = tsTwin(specifier, context)
  if (twin === undefined) return nextResolve(specifier, context)
  try {
    return await nextResolve(specifier, context)
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err
    return nextResolve(twin, context).catch(() => { throw err })
  }
}

/** module.registerHooks' load hook. */
export function loadSync (url, context, nextLoad) {
  return isTypeScript(url) ? loaded(url) : nextLoad(url, context)
}

/** module.register's load hook. */
export async function load (url, context, nextLoad) {
  return isTypeScript(url) ? loaded(url) : nextLoad(url, context)
}
