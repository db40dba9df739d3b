/**
 * For agents instrumented with OpenTelemetry rather than this client's own spans: a span processor
 * that gives every span of an agent run the run's agent and conversation.
 *
 * The GenAI conventions put `gen_ai.agent.name` and `gen_ai.conversation.id` on the `invoke_agent`
 * span only. The SDK's BatchSpanProcessor exports spans as they end, every 5 s or 512 spans, so the
 * model calls and tools of a longer run are exported before the run's own span ends, and the
 * service, which reads an export on its own, cannot tell whose they are (they go to the resource's
 * `service.name`). Copied onto each span when it starts, the run's attributes travel with it.
 *
 * No OpenTelemetry import: the processor is typed by the few members it uses, so the client keeps
 * no dependency and works with the SDK's 1.x and 2.x spans alike.
 */

/**
 * What the processor copies from the nearest span above, by group: the agent (name or id) and the
 * conversation (GenAI's or the generic session id). A span with any attribute of a group keeps the
 * group as it is (a sub-agent named by its id alone is not given its parent's name, which the
 * service would read first); otherwise it takes the group's attributes of the nearest span above
 * that has any.
 */
export const INHERITED_GROUPS: readonly (readonly string[])[] = [['gen_ai.agent.name', 'gen_ai.agent.id'], ['gen_ai.conversation.id', 'session.id']]
export const INHERITED_ATTRIBUTES: readonly string[] = INHERITED_GROUPS.flat()

/** The most spans the processor remembers at once: started and not yet ended (a span never ended is forgotten first). */
const REMEMBERED_MAX = 10_000
/** The longest chain of parents walked up for one attribute. */
const DEPTH_MAX = 64

/** The members of an SDK span (`@opentelemetry/sdk-trace-base`'s Span, 1.x or 2.x) the processor uses. */
export interface OtelSpan {
  spanContext(): { spanId: string }
  readonly attributes?: Readonly<Record<string, unknown>>
  /** 2.x */
  readonly parentSpanContext?: { spanId: string } | undefined
  /** 1.x */
  readonly parentSpanId?: string | undefined
  setAttribute(key: string, value: string): unknown
}

function parentOf (span: OtelSpan): string | undefined {
  return span.parentSpanContext?.spanId ?? span.parentSpanId ?? undefined
}

/**
 * Register it before the exporting processor, on the provider:
 * `new NodeTracerProvider({ spanProcessors: [new AgentSpanProcessor(), new BatchSpanProcessor(exporter)] })`.
 * A span started under a span of the same process that has one of INHERITED_ATTRIBUTES (itself or
 * further up) gets its value, unless it has its own: a sub-agent's `invoke_agent` span keeps its
 * name, and the spans under it take that one. A value set on a parent after a child started does not
 * reach that child. Spans whose parent is in another process (a trace continued from a request)
 * take nothing.
 */
export class AgentSpanProcessor {
  private readonly live = new Map<string, OtelSpan>()

  onStart (span: OtelSpan, _parentContext?: unknown): void {
    try {
      const id = span.spanContext().spanId
      if (this.live.size >= REMEMBERED_MAX) this.live.delete(this.live.keys().next().value!)
      this.live.set(id, span)
      const own = span.attributes ?? {}
      for (const group of INHERITED_GROUPS) {
        if (group.some((key) => own[key] !== undefined)) continue
        const above = this.above(span, group)
        if (above === undefined) continue
        for (const key of group) {
          const value = above.attributes?.[key]
          if (typeof value === 'string' && value !== '') span.setAttribute(key, value)
        }
      }
    } catch {
      // A processor that throws would break the application's span: nothing is copied instead.
    }
  }

  onEnd (span: Pick<OtelSpan, 'spanContext'>): void {
    try {
      this.live.delete(span.spanContext().spanId)
    } catch { /* as onStart */ }
  }

  forceFlush (): Promise<void> {
    return Promise.resolve()
  }

  shutdown (): Promise<void> {
    this.live.clear()
    return Promise.resolve()
  }

  /** The nearest started, not yet ended, span above `span` with an attribute of `group`. */
  private above (span: OtelSpan, group: readonly string[]): OtelSpan | undefined {
    let parentId = parentOf(span)
    for (let depth = 0; parentId !== undefined && depth < DEPTH_MAX; depth++) {
      const parent = this.live.get(parentId)
      if (parent === undefined) return undefined
      if (group.some((key) => { const v = parent.attributes?.[key]; return typeof v === 'string' && v !== '' })) return parent
      parentId = parentOf(parent)
    }
    return undefined
  }
}
