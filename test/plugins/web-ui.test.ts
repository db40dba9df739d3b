import t from 'tap'
import { createHash } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { buildTestApp } from '../helpers/app.ts'
import { UI_ROOT } from '../../src/plugins/web-ui.ts'

const app = await buildTestApp(t)

t.test('GET / serves the UI with a policy that allows only our scripts and the import map', async (t) => {
  const res = await app.inject({ url: '/' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /text\/html/)
  t.match(res.body, /<div id="app">/)
  const map = /<script type="importmap">([\s\S]*?)<\/script>/.exec(res.body)![1]!
  const csp = String(res.headers['content-security-policy'])
  t.match(csp, `script-src 'self' 'sha256-${createHash('sha256').update(map).digest('base64')}'`)
  t.match(csp, "connect-src 'self'")
  t.equal(res.headers['referrer-policy'], 'no-referrer')
  t.equal(res.headers['cache-control'], 'no-cache')
})

t.test('every module the UI imports is served from this origin', async (t) => {
  const index = (await app.inject({ url: '/' })).body
  const importMap = JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(index)![1]!).imports as Record<string, string>
  for (const url of [...Object.values(importMap), '/vendor/uPlot.iife.min.js', '/vendor/uPlot.min.css', '/app.css']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, url)
  }
  const files: string[] = []
  const walk = (dir: string) => { for (const e of readdirSync(dir, { withFileTypes: true })) e.isDirectory() ? walk(join(dir, e.name)) : files.push(join(dir, e.name)) }
  walk(join(UI_ROOT, 'js'))
  for (const file of files) {
    const url = '/' + relative(UI_ROOT, file)
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, url)
    t.match(res.headers['content-type'], /javascript/, url)
    t.match(index, `<link rel="modulepreload" href="${url}">`, `${url} is preloaded`)
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(/^import .* from '([^']+)'/gm)) {
      if (spec!.startsWith('.')) t.equal((await app.inject({ url: new URL(spec!, `http://x${url}`).pathname })).statusCode, 200, `${url} imports ${spec}`)
      else t.ok(importMap[spec!], `${url} imports ${spec}, which the import map names`)
    }
  }
})

t.test('nothing else is reachable and the API keeps its JSON 404', async (t) => {
  for (const url of ['/nope', '/v1/nope', '/vendor/preact.mjs.map', '/node_modules/preact/package.json', '/vendor/../package.json', '/../package.json', '/index.html/..%2f..%2fpackage.json']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 404, url)
    t.equal(res.json().error, 'not_found', url)
  }
})
