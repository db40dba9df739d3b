/**
 * A long agent run as POST /v1/events receives it: one event per span, linked by metadata.spanId and
 * metadata.parentSpanId. Every span carries what a model call that picked a tool carries: the model,
 * a token breakdown, the tool, a reasoning text of 316 characters (a few sentences, as agents
 * write them between steps), a 120-byte JSON input, a duration, an outcome, a session and a privacy
 * level. Used to measure the trace detail's size (test/routes) and the UI's speed (bench/).
 */
export const REASONING = 'The failing test expects the invoice total to include the late fee, but computeLateFee() is only called for monthly plans. ' +
  'Annual plans skip it because the branch checks plan.interval === "month". I will read the billing service to confirm where the interval is decided, ' +
  'then patch the condition and rerun the suite.'

const TOOLS = ['read_file', 'search_code', 'run_tests', 'edit_file']

/** The span id of the i-th span: 16 hex characters, as OpenTelemetry writes them. */
export const spanIdOf = (i: number) => i.toString(16).padStart(16, '0')

/**
 * `count` events of one trace, in time order (one every 10 ms from `startMs`); `parentOf(i)` is the
 * index of span i's parent (always lower than i), or null for a root.
 */
export function agentRun (opts: { agentId: string; traceId: string; count: number; startMs: number; parentOf: (i: number) => number | null }) {
  return Array.from({ length: opts.count }, (_, i) => {
    const parent = opts.parentOf(i)
    return {
      agentId: opts.agentId,
      type: 'tool',
      timestamp: opts.startMs + i * 10,
      durationMs: 800 + (i * 37) % 2400,
      outcome: 'success',
      model: 'claude-sonnet-4-5',
      toolExecuted: TOOLS[i % TOOLS.length],
      input: { path: 'src/services/billing/invoice-service.ts', query: 'where is the late fee computed for annual plans?', limit: 50 },
      reasoning: REASONING,
      metadata: {
        traceId: opts.traceId,
        spanId: spanIdOf(i),
        ...(parent === null ? {} : { parentSpanId: spanIdOf(parent) }),
        sessionId: `session-${opts.traceId}`,
        privacyLevel: 'standard',
        tokensBreakdown: { inputBase: 1800 + (i * 53) % 1200, cacheRead: 12_000, output: 300 + (i * 29) % 200 },
      },
    }
  })
}
