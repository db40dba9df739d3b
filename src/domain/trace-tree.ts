/** An event's place in its trace: the span it is, and the span it is a child of (null when not sent). */
export interface TreeInput { spanId?: string | null; parentSpanId?: string | null }

/** A trace's tree over its events, by their positions in the list it was built from. */
export interface TraceTree {
  /** Positions of the root events: in list order, then the events where a cycle was cut. */
  roots: number[]
  /** The position of each event's parent, null for a root. */
  parent: (number | null)[]
  /** The positions of each event's children, in list order (time order). */
  children: number[][]
  /** 0 for a root. */
  depth: number[]
}

/**
 * The parent/child structure of a trace's events, from span ids. Events without a span link, or whose
 * parent span is not in the trace (not sent yet, or sampled out), are roots; when several events name
 * the same span id the first is that span. A cycle (a client error) is cut at its earliest event,
 * which becomes a root, so every event appears exactly once. Events from POST /v1/events without
 * metadata.spanId / parentSpanId are all roots: the timeline stays flat.
 */
export function traceTree (events: TreeInput[]): TraceTree {
  const bySpan = new Map<string, number>()
  events.forEach((e, i) => { if (e.spanId && !bySpan.has(e.spanId)) bySpan.set(e.spanId, i) })
  const parent = events.map((e, i) => {
    const p = e.parentSpanId ? bySpan.get(e.parentSpanId) : undefined
    return p === undefined || p === i ? null : p
  })
  const children: number[][] = events.map(() => [])
  parent.forEach((p, i) => { if (p !== null) children[p]!.push(i) })
  const roots = parent.flatMap((p, i) => (p === null ? [i] : []))
  const depth = events.map(() => -1)
  const walk = (root: number) => {
    depth[root] = 0
    const stack = [root]
    while (stack.length > 0) {
      const i = stack.pop()!
      for (const c of children[i]!) {
        depth[c] = depth[i]! + 1
        stack.push(c)
      }
    }
  }
  for (const root of roots) walk(root)
  for (let i = 0; i < events.length; i++) {
    if (depth[i] !== -1) continue
    // Only cycles are left unvisited: cut this event from its parent and start from it.
    const p = parent[i]!
    children[p] = children[p]!.filter((c) => c !== i)
    parent[i] = null
    roots.push(i)
    walk(i)
  }
  return { roots, parent, children, depth }
}
