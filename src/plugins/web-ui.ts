import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyPluginAsync } from 'fastify'
import fastifyStatic from '@fastify/static'

/** The UI's own files: index.html, the stylesheet and the ES modules under ui/js. */
export const UI_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'ui')

const require = createRequire(import.meta.url)
/** The directory of an installed package (some do not export their package.json). */
function packageDir (name: string): string {
  let dir = dirname(require.resolve(name))
  while (!existsSync(join(dir, 'package.json')) || JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name !== name) {
    const up = dirname(dir)
    if (up === dir) throw new Error(`cannot find the directory of ${name}`)
    dir = up
  }
  return dir
}

/**
 * Browser builds taken from installed packages, served under /vendor/. Only these files: the import
 * map in ui/index.html names them, and nothing else of node_modules is reachable.
 */
const VENDOR_FILES: Record<string, string> = {
  'preact.mjs': join(packageDir('preact'), 'dist', 'preact.mjs'),
  'preact-hooks.mjs': join(packageDir('preact'), 'hooks', 'dist', 'hooks.mjs'),
  'htm.mjs': join(packageDir('htm'), 'dist', 'htm.mjs'),
  'htm-preact.mjs': join(packageDir('htm'), 'preact', 'index.mjs'),
  'uPlot.iife.min.js': join(packageDir('uplot'), 'dist', 'uPlot.iife.min.js'),
  'uPlot.min.css': join(packageDir('uplot'), 'dist', 'uPlot.min.css'),
}

/**
 * Content-Security-Policy of the UI: scripts only from this origin, plus the inline import map,
 * allowed by its hash (computed from index.html at start, so editing the map cannot break it).
 */
function contentSecurityPolicy (indexHtml: string): string {
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(indexHtml)
  const hash = importMap ? ` 'sha256-${createHash('sha256').update(importMap[1]!).digest('base64')}'` : ''
  return [
    "default-src 'self'",
    `script-src 'self'${hash}`,
    // uPlot and Preact set element styles from script.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "form-action 'self'",
  ].join('; ')
}

/**
 * The web UI at `/`: static files from ui/ and the vendor builds, same origin as the API, no build
 * step and nothing fetched from the network. Every file is revalidated (ETag), so a new release is
 * picked up on the next load.
 */
const webUi: FastifyPluginAsync = async (app) => {
  const csp = contentSecurityPolicy(readFileSync(join(UI_ROOT, 'index.html'), 'utf8'))
  app.addHook('onSend', async (_request, reply) => {
    reply.header('content-security-policy', csp)
    reply.header('x-content-type-options', 'nosniff')
    // The sign-in token travels in the URL fragment, which browsers never send; no referrer either.
    reply.header('referrer-policy', 'no-referrer')
    reply.header('cache-control', 'no-cache')
  })
  // wildcard: false lists the files at start and routes exactly those: no catch-all GET route, so
  // an unknown path still gets the API's JSON 404.
  await app.register(fastifyStatic, { root: UI_ROOT, prefix: '/', wildcard: false, cacheControl: false })
  for (const [name, file] of Object.entries(VENDOR_FILES)) {
    app.get(`/vendor/${name}`, { schema: { hide: true } }, (_request, reply) => reply.sendFile(file.slice(dirname(file).length + 1), dirname(file), { cacheControl: false }))
  }
}

export default webUi
