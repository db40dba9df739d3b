import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import type { RouteOptions } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { ROUTES_DIR } from '../../src/plugins/routes.ts'
import { testConfig } from '../helpers/app.ts'

const routes: RouteOptions[] = []
const app = await buildApp(testConfig(), { logger: false, onRoute: (route) => { routes.push(route) } })
t.teardown(() => app.close())
await app.ready()

const served = new Set(routes.flatMap((r) => [r.method].flat().map((m) => `${m} ${r.url}`)))

/** The route files under src/routes, with the URL prefix their folder gives them. */
function routeFiles (dir = ROUTES_DIR): { file: string; prefix: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return routeFiles(path)
    if (!entry.name.endsWith('.ts') || entry.name.startsWith('_') || entry.name === 'autohooks.ts') return []
    const folder = relative(ROUTES_DIR, dir)
    return [{ file: relative(ROUTES_DIR, path), prefix: folder ? `/${folder}` : '' }]
  })
}

t.test('every route file is loaded, its paths relative to its folder', async (t) => {
  const files = routeFiles()
  t.ok(files.length >= 15, `${files.length} route files`)
  for (const { file, prefix } of files) {
    const declared = [...readFileSync(join(ROUTES_DIR, file), 'utf8').matchAll(/\bapp\.(get|post|put|patch|delete)\s*(?:<[^>]*>)?\(\s*'([^']*)'/g)]
    t.ok(declared.length > 0, `${file} declares routes`)
    for (const [, method, path] of declared) {
      t.notOk(prefix && path!.startsWith(`${prefix}/`), `${file}: '${path}' is written relative to its folder (${prefix})`)
      t.ok(served.has(`${method!.toUpperCase()} ${prefix}${path}`), `${file}: ${method!.toUpperCase()} ${prefix}${path} is served`)
    }
  }
})

t.test('every route under /v1/me takes the folder\'s hooks: no token, 401 before anything else', async (t) => {
  const me = routes.filter((r) => r.url === '/v1/me' || r.url.startsWith('/v1/me/'))
  t.ok(me.length >= 40, `${me.length} routes under /v1/me`)
  for (const route of me) {
    for (const method of [route.method].flat()) {
      const url = route.url.replace(/:[A-Za-z]+/g, 'x')
      const res = await app.inject({ method, url, payload: method === 'GET' || method === 'HEAD' || method === 'DELETE' ? undefined : {} })
      t.equal(res.statusCode, 401, `${method} ${route.url}`)
      if (method !== 'HEAD') t.equal(res.json().error, 'unauthorized', `${method} ${route.url}: the error body`)
    }
  }
})
