/**
 * The active span, carried across awaits by AsyncLocalStorage where the runtime has it (Node, Bun,
 * Deno and Workers with Node compatibility), found through `process.getBuiltinModule` so nothing
 * Node-only is imported on the main path and bundlers see no `node:` import. Elsewhere (browsers)
 * there is no implicit context: pass the parent explicitly (`span.span(...)` or `{ parent }`).
 */
export interface SpanContext { traceId: string; spanId: string }

interface Storage { getStore(): SpanContext | undefined; run<R>(store: SpanContext, fn: () => R): R }

function loadStorage (): Storage | undefined {
  try {
    const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
    const hooks = proc?.getBuiltinModule?.('node:async_hooks') as { AsyncLocalStorage?: new () => Storage } | undefined
    return hooks?.AsyncLocalStorage ? new hooks.AsyncLocalStorage() : undefined
  } catch {
    return undefined
  }
}

const storage = loadStorage()

/** Whether the active span follows awaits implicitly here. */
export const hasAsyncContext = storage !== undefined

// Until a span runs, no store can be active: track() skips the lookup (a few hundred ns each).
let used = false

/** The span whose function is running, where the runtime can tell. */
export function activeSpan (): SpanContext | undefined {
  return used ? storage?.getStore() : undefined
}

/** Runs `fn` with `span` active (where the runtime carries context). */
export function runInSpan<R> (span: SpanContext, fn: () => R): R {
  if (!storage) return fn()
  used = true
  return storage.run(span, fn)
}
