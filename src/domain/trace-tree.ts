/** An event's place in its trace: the span it is, and the span it is a child of (null when not sent). */
export interface TreeInput { eventId: string; spanId?: string | null; parentSpanId?: string | null }

export interface TreeLinks {
  /** The event of the parent span, null for a root. */
  parentEventId: string | null
  /** Events of the child spans, in the order given (time order). */
  children: string[]
  /** 0 for a root. */
  depth: number
}

/**
 * The parent/child structure of a trace's events, from span ids. Events without a span link, or whose
 * parent span is not in the trace (not sent yet, or sampled out), are roots; when several events name
 * the same span id the first is that span. A cycle (a client error) is cut at its earliest event,
 * which becomes a root, so every event appears exactly once. Events from POST /v1/events without
 * metadata.spanId / parentSpanId are all roots: the timeline stays flat.
 */
export function traceTree (events: TreeInput[]): { roots: string[]; links: Map<string, TreeLinks> } {
  const bySpan = new Map<string, string>()
  for (const e of events) if (e.spanId && !bySpan.has(e.spanId)) bySpan.set(e.spanId, e.eventId)
  const links = new Map<string, TreeLinks>(events.map((e) => [e.eventId, { parentEventId: null, children: [], depth: 0 }]))
  for (const e of events) {
    const parent = e.parentSpanId ? bySpan.get(e.parentSpanId) : undefined
    if (parent !== undefined && parent !== e.eventId) {
      links.get(e.eventId)!.parentEventId = parent
      links.get(parent)!.children.push(e.eventId)
    }
  }
  const roots = events.filter((e) => links.get(e.eventId)!.parentEventId === null).map((e) => e.eventId)
  const visited = new Set<string>()
  const walk = (root: string) => {
    const stack = [root]
    links.get(root)!.depth = 0
    while (stack.length > 0) {
      const id = stack.pop()!
      visited.add(id)
      const node = links.get(id)!
      for (const child of node.children) {
        links.get(child)!.depth = node.depth + 1
        stack.push(child)
      }
    }
  }
  for (const root of roots) walk(root)
  for (const e of events) {
    if (visited.has(e.eventId)) continue
    // Only cycles are left unvisited: cut this event from its parent and start from it.
    const node = links.get(e.eventId)!
    const parent = links.get(node.parentEventId!)!
    parent.children = parent.children.filter((c) => c !== e.eventId)
    node.parentEventId = null
    roots.push(e.eventId)
    walk(e.eventId)
  }
  return { roots, links }
}
