import type { ClickHouseClient } from '@clickhouse/client'

/** A query as the counting client saw it: its `svc:` tag and its parameters. */
export interface SeenQuery { tag: string; params: Record<string, unknown> }

/**
 * The client, telling `seen` of every query before it runs (the `svc:<tag>` in the comment each
 * repository query starts with, and its parameters): how tests count what a read asked the engine.
 */
export function countingClient (client: ClickHouseClient, seen: (q: SeenQuery) => void): ClickHouseClient {
  return new Proxy(client, {
    get (target, prop) {
      if (prop === 'query') {
        return (p: Parameters<ClickHouseClient['query']>[0]) => {
          seen({ tag: /svc:(\w+)/.exec(p.query)?.[1] ?? '', params: (p.query_params ?? {}) as Record<string, unknown> })
          return target.query(p)
        }
      }
      const v = Reflect.get(target, prop, target)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
}
