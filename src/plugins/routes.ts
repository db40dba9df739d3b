import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import fp from 'fastify-plugin'
import autoload from '@fastify/autoload'
import type { Config } from '../config.ts'

/** The route files: their folder under it is their URL prefix (src/routes/v1/me/keys.ts serves /v1/me/keys…). */
export const ROUTES_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'routes')

/** The settings routes and the folders' hooks read (from `app.routeSettings`). */
export interface RouteSettings {
  /** Largest body of POST /v1/events, and of every route that sets none of its own (BODY_LIMIT). */
  bodyLimit: Config['bodyLimit']
  /** Largest body of POST /v1/events/batch and of POST /v1/traces (BATCH_BODY_LIMIT). */
  batchBodyLimit: Config['batchBodyLimit']
  /** Per user and route, a minute, under /v1/me: reads (GET, HEAD) and the rest. */
  meLimits: Config['meLimits']
  /** How long a /v1/me request waits for the caller's acknowledged events (READ_YOUR_WRITES_TIMEOUT_MS). */
  readYourWritesTimeoutMs: Config['ingest']['readYourWritesTimeoutMs']
}

declare module 'fastify' {
  interface FastifyInstance {
    routeSettings: Readonly<RouteSettings>
  }
}

/**
 * Every route of the API, composed by folder from src/routes with @fastify/autoload: a file is an
 * encapsulated plugin whose paths are relative to its folder; an `autohooks.ts` holds the hooks of its
 * folder and of every folder below it (cascadeHooks), so a route under /v1/me cannot miss the
 * caller's authentication. Registered after the stores and services the routes use.
 */
export default fp(async function routes (app, settings: RouteSettings) {
  app.decorate('routeSettings', Object.freeze({ ...settings }))
  // Autoload refuses .ts files unless it recognises the TypeScript loader, and it does not recognise
  // ours (src/ts-loader.mjs); its documented switch says the loader is there. This
  // module is itself TypeScript, so the running process loads .ts files.
  // eslint-disable-next-line no-restricted-properties
  process.env.FASTIFY_AUTOLOAD_TYPESCRIPT ??= '1'
  await app.register(autoload, {
    dir: ROUTES_DIR,
    autoHooks: true,
    cascadeHooks: true,
    // Route files only: TypeScript modules, not declarations; a module whose name starts with `_` is
    // a helper of the routes beside it, not a route file.
    scriptPattern: /(?<!\.d)\.ts$/,
    ignorePattern: /(?:^|\/)_/,
    // Every file of a folder is loaded: an index.ts is not special (by default it would hide its siblings).
    indexPattern: /(?!)/,
  })
}, { name: 'routes' })
