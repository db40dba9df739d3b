import { isEventTime } from './date-time.ts'
import type { IncomingEvent } from './event-row.ts'
import { wellFormed, type AttrValue, type Attributes, type OtlpSpan } from './otlp-codec.ts'

/**
 * One OpenTelemetry span as one of our events, following the GenAI semantic conventions (current
 * names first, then the deprecated ones OpenLLMetry and older instrumentations send, then the Vercel
 * AI SDK's `ai.*` names). The event then goes through the same pipeline as a POST /v1/events body.
 */

/** Resource or span attribute naming the span's privacy level (minimal | standard | full). */
const PRIVACY_ATTRIBUTE = 'agent_telemetry.privacy_level'

const MODEL_CALLS = new Set(['chat', 'text_completion', 'generate_content', 'embeddings', 'completion'])
const AGENT_OPERATIONS = new Set(['invoke_agent', 'create_agent'])
const PRIVACY_LEVELS = new Set(['minimal', 'standard', 'full'])

// Attributes holding prompts, completions, tool arguments and results: kept only above `minimal`.
export const CONTENT_PREFIXES = [
  'gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.system_instructions', 'gen_ai.tool.call.arguments',
  'gen_ai.tool.call.result', 'gen_ai.prompt', 'gen_ai.completion', 'llm.prompts', 'llm.completions',
  'traceloop.entity.input', 'traceloop.entity.output', 'ai.prompt', 'ai.response.text', 'ai.response.object',
  'ai.response.toolCalls', 'ai.response.reasoning', 'ai.toolCall.args', 'ai.toolCall.result',
]
// OpenInference's and Langfuse's content, read into the event's input and output above `minimal` and
// so not kept twice. Apart from CONTENT_PREFIXES, whose list the facet view of clickhouse/028 holds:
// these never reach the facets either (moved out above `minimal`, dropped at it).
const MOVED_CONTENT_PREFIXES = ['input.value', 'output.value', 'llm.input_messages', 'llm.output_messages', 'tool.parameters',
  'langfuse.observation.input', 'langfuse.observation.output']
// Span events carrying content (the deprecated per-message events) or file paths (stack traces).
const CONTENT_EVENT_PREFIXES = ['gen_ai.content.', 'gen_ai.user.message', 'gen_ai.system.message', 'gen_ai.assistant.message', 'gen_ai.tool.message', 'gen_ai.choice']

/**
 * What a span keeps at `minimal`, which sends metadata only, no content: attributes that describe the
 * call (operation, model, provider, usage, timings, status, ids), never one that may hold what was
 * said, read or passed, whatever the instrumentation names it (`input.value`, `langfuse.observation.input`,
 * `pydantic_ai.all_messages`, `http.url` with its query, a resource's `process.command_args`). Each
 * kept name also has a kind of value: a count or setting is kept only as a number (or a boolean, or
 * a string of a number), a name or id only as one short line of text (at most 256 characters), a
 * list only of such lines; any other value under the name is dropped, so that no text rides on a
 * name that describes. Names are listed whole, never as a namespace with anything under it. An
 * attribute not listed is dropped at `minimal`; above it, everything is kept.
 */
const MINIMAL_NUMBERS = new RegExp('^(?:' + [
  String.raw`gen_ai\.request\.(?:max_tokens|temperature|top_p|top_k|frequency_penalty|presence_penalty|seed|choice\.count)`,
  String.raw`gen_ai\.usage\.(?:input_tokens|output_tokens|prompt_tokens|completion_tokens|total_tokens|cache_read\.input_tokens|cache_creation\.input_tokens|cache_read_input_tokens|cache_creation_input_tokens|reasoning\.output_tokens|reasoning_tokens|input_tokens\.cached|output_tokens\.reasoning|details\.(?:cache_read_tokens|cache_write_tokens|reasoning_tokens|input_tokens|output_tokens))`,
  String.raw`gen_ai\.evaluation\.score\.value`,
  String.raw`llm\.token_count\.(?:prompt|completion|total|prompt_details\.(?:cache_read|cache_write|audio)|completion_details\.(?:reasoning|audio))`,
  String.raw`llm\.usage\.(?:prompt_tokens|completion_tokens|total_tokens|cache_read_input_tokens|cache_creation_input_tokens)|llm\.is_streaming`,
  String.raw`ai\.usage\.(?:promptTokens|completionTokens|totalTokens|inputTokens|outputTokens|cachedInputTokens|reasoningTokens)`,
  String.raw`ai\.response\.(?:msToFirstChunk|msToFinish|avgCompletionTokensPerSecond|avgOutputTokensPerSecond)|ai\.settings\.(?:maxRetries|maxOutputTokens|maxTokens|temperature|topP|topK)`,
  String.raw`http\.(?:status_code|response\.status_code)|server\.port|code\.lineno|thread\.id`,
].join('|') + ')$')
const MINIMAL_TEXT = new RegExp('^(?:' + [
  String.raw`gen_ai\.(?:operation\.name|system|provider\.name|request\.model|response\.(?:model|id)|agent\.(?:name|id)|conversation\.id|tool\.(?:name|call\.id|type)|data_source\.id|output\.type|token\.type|evaluation\.(?:name|score\.label))`,
  String.raw`llm\.(?:model_name|provider|system|request\.(?:type|model)|response\.model)|openinference\.span\.kind`,
  String.raw`ai\.(?:operationId|model\.(?:id|provider)|response\.(?:id|model|finishReason|timestamp)|telemetry\.functionId|telemetry\.metadata\.sessionId|toolCall\.(?:name|id))`,
  String.raw`traceloop\.(?:span\.kind|entity\.name|workflow\.name|association\.properties\.session_id)`,
  String.raw`langfuse\.(?:observation\.(?:type|level|model\.name|completion_start_time)|session\.id|environment|release|version)`,
  String.raw`session\.id|error\.type|exception\.type|otel\.(?:status_code|scope\.name|scope\.version|library\.name|library\.version|span\.kind)|thread\.name|code\.(?:function|namespace)`,
  String.raw`http\.(?:method|request\.method|route)|server\.address|url\.scheme|rpc\.(?:system|service|method)`,
].join('|') + ')$')
const MINIMAL_TEXT_LISTS = /^gen_ai\.(?:response\.finish_reasons|request\.encoding_formats)$/

/** What a resource keeps at `minimal`, as one short line of text or a number: the service and where it runs. */
const MINIMAL_RESOURCE_NUMBERS = /^process\.pid$/
const MINIMAL_RESOURCE_TEXT = new RegExp('^(?:' + [
  String.raw`service\.(?:name|namespace|version|instance\.id)|telemetry\.sdk\.(?:name|language|version)|telemetry\.distro\.(?:name|version)`,
  String.raw`deployment\.environment(?:\.name)?|host\.(?:name|arch|type)|os\.(?:type|version)`,
  String.raw`cloud\.(?:provider|platform|region|availability_zone|account\.id)`,
  String.raw`k8s\.(?:cluster|namespace|node|pod|deployment|statefulset|daemonset|replicaset|job|cronjob|container)\.name`,
  String.raw`container\.(?:name|id)|process\.runtime\.(?:name|version)|faas\.(?:name|version|instance)`,
].join('|') + ')$')

/**
 * Attributes unique to a span or measuring it: ids (of the response, of the tool call), its
 * conversation (the event's sessionId, by whichever name the instrumentation gives it), token
 * counts and timings. The facets leave them out
 * (src/storage/search-repository.ts, FACET_HIDDEN_OTEL): an hour's counts would hold a row per span.
 */
export const PER_SPAN_ATTRIBUTES = [
  'gen_ai.response.id', 'gen_ai.tool.call.id', 'gen_ai.conversation.id', 'gen_ai.usage', 'llm.usage', 'session.id',
  'langfuse.session.id', 'ai.telemetry.metadata.sessionId', 'traceloop.association.properties.session_id',
  'llm.token_count', 'langfuse.observation.usage_details', 'langfuse.observation.cost_details', 'langfuse.observation.completion_start_time',
  'ai.response.id', 'ai.response.timestamp', 'ai.response.msToFirstChunk', 'ai.response.msToFinish',
  'ai.response.avgCompletionTokensPerSecond', 'ai.response.avgOutputTokensPerSecond', 'ai.toolCall.id', 'ai.usage',
]

const CONTENT_KEY = new RegExp(`^(${[...CONTENT_PREFIXES, ...MOVED_CONTENT_PREFIXES].map((p) => p.replace(/\./g, '\\.')).join('|')})(\\.|$)`)

export function isContentAttribute (key: string): boolean {
  return CONTENT_KEY.test(key)
}

const MAX_TOKENS = 10_000_000_000

/**
 * What a span was: a model call, a tool execution, an agent run, a step its instrumentation names
 * as none of those (an OpenInference chain or retriever, a Langfuse span or event), or anything else.
 */
type SpanRole = 'model' | 'tool' | 'agent' | 'step' | 'other'

export function spanRole (span: OtlpSpan): SpanRole {
  const a = span.attributes
  const op = str(a, 'gen_ai.operation.name', 'llm.request.type')
  const traceloop = str(a, 'traceloop.span.kind')
  const vercel = str(a, 'ai.operationId') ?? span.name
  // OpenInference (LlamaIndex, DSPy, CrewAI, smolagents, Phoenix) and Langfuse name the kind outright.
  const kind = str(a, 'openinference.span.kind')?.toUpperCase()
  const observation = str(a, 'langfuse.observation.type')?.toLowerCase()
  if (op === 'execute_tool' || traceloop === 'tool' || vercel === 'ai.toolCall' || kind === 'TOOL' || observation === 'tool') return 'tool'
  if (op !== undefined && (MODEL_CALLS.has(op) || op === 'embedding')) return 'model'
  if (/^ai\.\w+\.do(Generate|Stream|Embed)$/.test(vercel)) return 'model'
  // The Vercel AI SDK's call (`ai.generateText`, `ai.streamObject`, `ai.embedMany`, …) wraps its model
  // calls and repeats their usage and model: a step, not another model call.
  if (isVercelWrapper(a)) return 'step'
  if (kind === 'LLM' || kind === 'EMBEDDING' || observation === 'generation' || observation === 'embedding') return 'model'
  if ((op !== undefined && AGENT_OPERATIONS.has(op)) || traceloop === 'agent' || kind === 'AGENT' || observation === 'agent') return 'agent'
  return kind !== undefined || observation !== undefined ? 'step' : 'other'
}

/** A Vercel AI SDK call's span (`ai.operationId` = `ai.<function>`), which wraps its model calls and tools. */
function isVercelWrapper (a: Attributes): boolean {
  const id = a['ai.operationId']
  return typeof id === 'string' && /^ai\.\w+$/.test(id) && id !== 'ai.toolCall'
}

/** The span as an event, or the reason it is refused (reported in partial_success). */
export function spanToEvent (span: OtlpSpan): IncomingEvent | string {
  if (span.traceId === '') return 'span has no valid trace id (16 bytes, not all zero)'
  if (span.spanId === '') return 'span has no valid span id (8 bytes, not all zero)'
  const a = span.attributes
  const role = spanRole(span)
  const privacy = privacyLevel(span)
  const withContent = privacy !== 'minimal'

  const exception = span.events.find((e) => e.name === 'exception')
  // Langfuse's SDKs mark a failed observation by its level rather than the span's status.
  const levelError = str(a, 'langfuse.observation.level')?.toUpperCase() === 'ERROR'
  // An exception event marks a failure unless the span's status says OK, which the conventions make
  // final: an instrumentation records a handled exception (a retried rate limit) and sets OK.
  const failed = span.status.code === 2 || (exception !== undefined && span.status.code !== 1) || levelError
  const errorType = str(exception?.attributes ?? {}, 'exception.type') ?? str(a, 'error.type')
  const errorText = str(exception?.attributes ?? {}, 'exception.message') ?? (span.status.message || undefined) ??
    (levelError ? str(a, 'langfuse.observation.status_message') : undefined)

  const event: IncomingEvent = {
    agentId: agentOf(span),
    type: failed ? 'error' : role === 'model' ? 'reasoning' : role === 'tool' ? 'tool' : 'action',
    metadata: {
      traceId: span.traceId,
      spanId: span.spanId,
      privacyLevel: privacy,
      tool: cut(span.scope.name, 100) || undefined,
    },
  }
  const meta = event.metadata!
  if (span.parentSpanId) meta.parentSpanId = span.parentSpanId
  if (span.startMs > 0 && isEventTime(span.startMs)) event.timestamp = span.startMs
  if (span.startMs > 0 && span.endMs >= span.startMs) event.durationMs = span.endMs - span.startMs
  if (span.status.code === 1) event.outcome = 'success'
  if (failed) {
    event.outcome = 'failed'
    event.errorMessage = [errorType, errorText ?? (errorType ? undefined : `${span.name} failed`)].filter(Boolean).join(': ')
  }

  const model = str(a, 'gen_ai.response.model', 'gen_ai.request.model', 'ai.response.model', 'ai.model.id', 'llm.model_name',
    'langfuse.observation.model.name', 'llm.response.model', 'llm.request.model')
  if (model && !isVercelWrapper(a)) event.model = cut(model, 200)
  const provider = str(a, 'gen_ai.provider.name', 'gen_ai.system', 'ai.model.provider', 'llm.provider', 'llm.system')
  if (provider) meta.provider = cut(provider, 100)
  const tool = role === 'tool' ? str(a, 'gen_ai.tool.name', 'ai.toolCall.name', 'tool.name', 'traceloop.entity.name') ?? span.name : undefined
  if (tool) event.toolExecuted = cut(tool, 200)
  const offered = toolsOffered(a)
  if (offered.length > 0) event.toolsConsidered = offered
  const session = str(a, 'gen_ai.conversation.id', 'session.id', 'langfuse.session.id', 'ai.telemetry.metadata.sessionId',
    'traceloop.association.properties.session_id')
  if (session) meta.sessionId = cut(session, 200)
  // Usage is counted on model calls and on spans of no known kind (an instrumentation of its own), not
  // on agent runs, tools or named steps: an agent's span repeats the usage of the model calls under it
  // (Strands, Pydantic AI), which would count it twice. It stays in the span's attributes.
  const tokens = role === 'model' || role === 'other' ? tokensOf(a) : undefined
  if (tokens) meta.tokensBreakdown = tokens

  if (withContent) {
    const user = str(a, 'user.id', 'enduser.id', 'langfuse.user.id', 'ai.telemetry.metadata.userId', 'traceloop.association.properties.user_id')
    if (user) meta.userId = cut(user, 200)
    const input = contentInput(a)
    if (input) event.input = input
    const output = contentOutput(a)
    if (output) event.reasoning = output
  }
  meta.otel = {
    name: span.name,
    kind: span.kind,
    operation: str(a, 'gen_ai.operation.name') ?? null,
    scope: span.scope,
    status: span.status,
    ...(errorType ? { errorType } : {}),
    attributes: withContent ? withoutContent(a) : minimalOf(a),
    resource: withContent ? span.resource : minimalOf(span.resource, true),
    // At `minimal` a span event keeps its name and time, and of its attributes only those that
    // describe; an exception keeps its type and message (the error clusters are built from it), never
    // its stack trace (file paths).
    events: span.events
      .filter((e) => withContent || !CONTENT_EVENT_PREFIXES.some((p) => e.name.startsWith(p)))
      .map((e) => ({ name: e.name, timeMs: e.timeMs, attributes: withContent ? e.attributes : minimalEventAttributes(e.name, e.attributes) })),
  }
  return event
}

/**
 * What a span takes from the others of its export, once each is mapped (`mapped[i]` is `spans[i]`'s
 * event, or the reason it was refused): a span that names no agent (no `gen_ai.agent.name` or `.id`)
 * belongs to the agent of its nearest ancestor in the export that names one, as the conventions put
 * the agent on its `invoke_agent` span only and not on the model calls under it; a span without a
 * session takes its nearest ancestor's, else the one session the trace's other spans in the export
 * agree on. Spans of a trace exported apart keep their own. Returns the indexes of the spans whose
 * agent is no span's of theirs, only the resource's `service.name` (a key bound to an agent sends
 * those for its agent).
 */
export function inheritWithinExport (spans: OtlpSpan[], mapped: Array<IncomingEvent | string>): Set<number> {
  const unnamed = new Set<number>()
  const at = new Map<string, number>()
  spans.forEach((s, i) => { if (typeof mapped[i] !== 'string') at.set(`${s.traceId}/${s.spanId}`, i) })
  const ancestors = function * (i: number) {
    const seen = new Set<number>([i])
    for (let p = at.get(`${spans[i]!.traceId}/${spans[i]!.parentSpanId}`); p !== undefined && !seen.has(p); p = at.get(`${spans[p]!.traceId}/${spans[p]!.parentSpanId}`)) {
      seen.add(p)
      yield p
    }
  }
  const sessionsOfTrace = new Map<string, Set<string>>()
  spans.forEach((s, i) => {
    const event = mapped[i]
    const session = event !== undefined && typeof event !== 'string' ? event.metadata?.sessionId : undefined
    if (session) sessionsOfTrace.set(s.traceId, (sessionsOfTrace.get(s.traceId) ?? new Set()).add(session))
  })
  spans.forEach((s, i) => {
    const event = mapped[i]
    if (event === undefined || typeof event === 'string') return
    const meta = event.metadata!
    // One walk up for both: it stops once neither is wanted any more.
    let wantsAgent = namedAgent(s) === undefined
    let wantsSession = !meta.sessionId
    for (const p of ancestors(i)) {
      if (!wantsAgent && !wantsSession) break
      const above = mapped[p] as IncomingEvent
      if (wantsAgent && namedAgent(spans[p]!) !== undefined) { event.agentId = above.agentId; wantsAgent = false }
      if (wantsSession && above.metadata?.sessionId) { meta.sessionId = above.metadata.sessionId; wantsSession = false }
    }
    const agreed = sessionsOfTrace.get(s.traceId)
    if (wantsSession && agreed?.size === 1) meta.sessionId = [...agreed][0]
    if (wantsAgent) unnamed.add(i)
  })
  return unnamed
}

/**
 * The agent a span names itself: gen_ai.agent.name, else gen_ai.agent.id, else on an OpenLLMetry
 * agent span (`traceloop.span.kind = agent`, its `@agent` decorator) the name it was given.
 */
function namedAgent (span: OtlpSpan): string | undefined {
  return str(span.attributes, 'gen_ai.agent.name', 'gen_ai.agent.id') ??
    (str(span.attributes, 'traceloop.span.kind') === 'agent' ? str(span.attributes, 'traceloop.entity.name') : undefined)
}

/** The agent a span names, else the resource's service.name (the SDK's default included). */
function agentOf (span: OtlpSpan): string {
  const name = namedAgent(span) ?? str(span.resource, 'service.name') ?? 'unknown_service'
  // Agent names are stored in Postgres, which refuses NUL characters and unpaired surrogates.
  // eslint-disable-next-line no-control-regex -- NUL is exactly what has to go
  return cut(wellFormed(name.replace(/\u0000/g, '')).trim(), 120) || 'unknown_service'
}

function privacyLevel (span: OtlpSpan): 'minimal' | 'standard' | 'full' {
  const level = str(span.attributes, PRIVACY_ATTRIBUTE) ?? str(span.resource, PRIVACY_ATTRIBUTE)
  return level !== undefined && PRIVACY_LEVELS.has(level) ? level as 'standard' : 'minimal'
}

/**
 * Token counts onto our breakdown. The conventions' input count includes cache reads and writes, so
 * the uncached input is what remains once they are taken out; an instrumentation that reports an input
 * smaller than its cache counts sent them apart (as Anthropic's API does), and its input is kept whole.
 */
function tokensOf (a: Attributes): NonNullable<IncomingEvent['metadata']>['tokensBreakdown'] | undefined {
  // Langfuse's usage_details, a JSON object of its own names.
  const details = jsonish(a['langfuse.observation.usage_details'])
  const lf = details !== null && typeof details === 'object' && !Array.isArray(details) ? details as Attributes : {}
  const input = count(a, 'gen_ai.usage.input_tokens', 'gen_ai.usage.prompt_tokens', 'llm.token_count.prompt', 'llm.usage.prompt_tokens') ??
    count(lf, 'input', 'prompt_tokens', 'input_tokens')
  const output = count(a, 'gen_ai.usage.output_tokens', 'gen_ai.usage.completion_tokens', 'llm.token_count.completion', 'llm.usage.completion_tokens') ??
    count(lf, 'output', 'completion_tokens', 'output_tokens')
  // Current names, then OpenInference's, Pydantic AI's `details`, Sentry's, the Vercel AI SDK's (on
  // its model calls: its wrapper spans carry no gen_ai.usage) and Langfuse's.
  const cacheRead = count(a, 'gen_ai.usage.cache_read.input_tokens', 'gen_ai.usage.cache_read_input_tokens', 'llm.token_count.prompt_details.cache_read',
    'gen_ai.usage.details.cache_read_tokens', 'gen_ai.usage.input_tokens.cached', 'ai.usage.cachedInputTokens') ??
    count(lf, 'cache_read_input_tokens', 'input_cached_tokens', 'cache_read')
  const cacheCreation = count(a, 'gen_ai.usage.cache_creation.input_tokens', 'gen_ai.usage.cache_creation_input_tokens', 'llm.token_count.prompt_details.cache_write',
    'gen_ai.usage.details.cache_write_tokens') ?? count(lf, 'cache_creation_input_tokens', 'cache_write')
  const reasoning = count(a, 'gen_ai.usage.reasoning.output_tokens', 'gen_ai.usage.reasoning_tokens', 'llm.token_count.completion_details.reasoning',
    'gen_ai.usage.details.reasoning_tokens', 'gen_ai.usage.output_tokens.reasoning', 'ai.usage.reasoningTokens') ?? count(lf, 'reasoning_tokens', 'output_reasoning_tokens')
  if (input === undefined && output === undefined && cacheRead === undefined && cacheCreation === undefined) return undefined
  const cached = (cacheRead ?? 0) + (cacheCreation ?? 0)
  const total = input ?? 0
  const out: Record<string, number> = {
    inputBase: total >= cached ? total - cached : total,
    cacheCreation: cacheCreation ?? 0,
    cacheRead: cacheRead ?? 0,
    output: output ?? 0,
  }
  if (reasoning !== undefined) out.reasoning = reasoning
  return out
}

function contentInput (a: Attributes): IncomingEvent['input'] | undefined {
  const input: Record<string, unknown> = {}
  const messages = jsonish(a['gen_ai.input.messages']) ?? indexedMessages(a, 'gen_ai.prompt') ?? jsonish(a['ai.prompt.messages']) ??
    indexedMessages(a, 'llm.input_messages')?.map(openInferenceMessage)
  if (messages !== undefined) input.messages = messages
  const system = a['gen_ai.system_instructions']
  if (system !== undefined) input.system = jsonish(system)
  // The Vercel AI SDK's call-level prompt: the JSON of the call's `system`, `prompt` and `messages`.
  const call = jsonish(a['ai.prompt'])
  if (isCallPrompt(call)) {
    // Since AI SDK 5 `prompt` may be the call's messages (ModelMessage[]) rather than a string: those
    // are the call's messages; any other kind of value is kept as its JSON text (`prompt` is text).
    const prompt = call.prompt
    if (Array.isArray(prompt) && input.messages === undefined && !Array.isArray(call.messages)) input.messages = prompt
    else if (typeof prompt === 'string') input.prompt = prompt
    else if (prompt !== undefined && prompt !== null) input.prompt = JSON.stringify(prompt)
    if (input.system === undefined && call.system !== undefined && call.system !== null) input.system = call.system
    if (input.messages === undefined && Array.isArray(call.messages)) input.messages = call.messages
  } else {
    const prompt = str(a, 'ai.prompt', 'traceloop.entity.input', 'input.value', 'langfuse.observation.input')
    if (prompt !== undefined) input.prompt = prompt
  }
  const args = a['gen_ai.tool.call.arguments'] ?? a['ai.toolCall.args'] ?? a['tool.parameters']
  if (args !== undefined) input.arguments = jsonish(args)
  return Object.keys(input).length > 0 ? input : undefined
}

function contentOutput (a: Attributes): string | undefined {
  const messages = a['gen_ai.output.messages']
  if (messages !== undefined) return outputText(jsonish(messages)) ?? (typeof messages === 'string' ? messages : JSON.stringify(messages))
  const completions = indexedMessages(a, 'gen_ai.completion')
  if (completions !== undefined) return completions.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''))).join('\n')
  const openInference = indexedMessages(a, 'llm.output_messages')
  if (openInference !== undefined) return openInference.map((m) => { const c = openInferenceMessage(m).content; return typeof c === 'string' ? c : JSON.stringify(c ?? '') }).join('\n')
  const text = str(a, 'ai.response.text', 'gen_ai.tool.call.result', 'ai.toolCall.result', 'traceloop.entity.output', 'output.value', 'langfuse.observation.output')
  if (text !== undefined) return text
  const object = a['ai.response.object'] ?? a['gen_ai.tool.call.result']
  return object === undefined ? undefined : JSON.stringify(object)
}

/**
 * The text of the conventions' output messages (`[{ role, parts: [{ type: 'text', content }] }]`) when
 * every part of every message is text: their contents, one line apart, as OpenLLMetry's completions
 * are kept. Undefined for anything else (a tool call, a blob, another shape), which is then kept as
 * its JSON text, so that nothing the messages say is dropped.
 */
function outputText (messages: unknown): string | undefined {
  if (!Array.isArray(messages) || messages.length === 0) return undefined
  const texts: string[] = []
  for (const message of messages) {
    const parts = (message as { parts?: unknown } | null)?.parts
    if (!Array.isArray(parts) || parts.length === 0) return undefined
    for (const part of parts) {
      const { type, content } = (part ?? {}) as { type?: unknown; content?: unknown }
      if (type !== 'text' || typeof content !== 'string') return undefined
      texts.push(content)
    }
  }
  return texts.join('\n')
}

/**
 * The names of the tools offered to the model: the conventions' `gen_ai.tool.definitions` (a JSON
 * list of `{ name }` or `{ function: { name } }`), OpenLLMetry's `llm.request.functions.N.name`, the
 * Vercel AI SDK's `ai.prompt.tools` (a list of JSON texts). Names only, at every level (as a tool's
 * name is kept at `minimal`); their descriptions and schemas stay in the attributes above `minimal`.
 */
function toolsOffered (a: Attributes): string[] {
  const names: string[] = []
  const add = (v: unknown) => {
    const d = typeof v === 'string' ? jsonish(v) : v
    const o = d !== null && typeof d === 'object' && !Array.isArray(d) ? d as Record<string, unknown> : undefined
    const fn = o?.function !== null && typeof o?.function === 'object' ? o.function as Record<string, unknown> : undefined
    const name = typeof o?.name === 'string' ? o.name : typeof fn?.name === 'string' ? fn.name : undefined
    if (name && names.length < 100 && !names.includes(name)) names.push(cut(name, 200))
  }
  const definitions = jsonish(a['gen_ai.tool.definitions'])
  if (Array.isArray(definitions)) definitions.forEach(add)
  const vercel = a['ai.prompt.tools']
  if (Array.isArray(vercel)) vercel.forEach(add)
  // OpenLLMetry numbers them from 0: a span without the first has none (and is not scanned for them).
  if (a['llm.request.functions.0.name'] !== undefined) for (const f of indexedMessages(a, 'llm.request.functions') ?? []) add(f)
  return names
}

/** An OpenInference message (`message.role`, `message.content` flattened under its index) as `{ role, content }`. */
function openInferenceMessage (m: Record<string, AttrValue>): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {}
  for (const [k, v] of Object.entries(m)) {
    const name = k.startsWith('message.') ? k.slice('message.'.length) : k
    // As the codec leaves such attributes out: set, it would replace the message's prototype.
    if (name !== '__proto__') out[name] = v
  }
  return out
}

/** OpenLLMetry's flattened messages (`gen_ai.prompt.0.role`, `gen_ai.prompt.0.content`, …) as a list. */
function indexedMessages (a: Attributes, prefix: string): Record<string, AttrValue>[] | undefined {
  const byIndex = new Map<number, Record<string, AttrValue>>()
  for (const [key, value] of Object.entries(a)) {
    const m = key.startsWith(`${prefix}.`) ? /^(\d+)\.(.+)$/.exec(key.slice(prefix.length + 1)) : null
    if (!m || m[2] === '__proto__') continue
    const i = Number(m[1])
    if (!byIndex.has(i)) byIndex.set(i, {})
    byIndex.get(i)![m[2]!] = value
  }
  return byIndex.size === 0 ? undefined : [...byIndex.entries()].sort((x, y) => x[0] - y[0]).map(([, v]) => v)
}

function withoutContent (a: Attributes): Attributes {
  const out: Attributes = {}
  for (const [k, v] of Object.entries(a)) if (!isContentAttribute(k) && k !== PRIVACY_ATTRIBUTE) out[k] = v
  return out
}

type MinimalKind = 'number' | 'text' | 'texts' | null

// An instrumentation sends the same few keys on every span: each key's kind is remembered rather
// than matched again (bounded, and forgotten whole when full).
const spanKinds = new Map<string, MinimalKind>()
const resourceKinds = new Map<string, MinimalKind>()
function minimalKind (key: string, resource: boolean): MinimalKind {
  const known = resource ? resourceKinds : spanKinds
  let kind = known.get(key)
  if (kind === undefined) {
    if (known.size >= 10_000) known.clear()
    kind = resource
      ? MINIMAL_RESOURCE_NUMBERS.test(key) ? 'number' : MINIMAL_RESOURCE_TEXT.test(key) ? 'text' : null
      : MINIMAL_NUMBERS.test(key) ? 'number' : MINIMAL_TEXT.test(key) ? 'text' : MINIMAL_TEXT_LISTS.test(key) ? 'texts' : null
    known.set(key, kind)
  }
  return kind
}

const shortLine = (v: unknown): v is string => typeof v === 'string' && v.length <= 256 && !/[\r\n]/.test(v)

/** A value as `minimal` keeps it under a name of `kind`, or undefined when it is not of that kind. */
function minimalValue (kind: MinimalKind, key: string, v: AttrValue): AttrValue | undefined {
  if (kind === 'number') return typeof v === 'number' || typeof v === 'boolean' || (typeof v === 'string' && /^-?\d{1,20}(?:\.\d{1,20})?$/.test(v)) ? v : undefined
  if (kind === 'texts') return Array.isArray(v) && v.length <= 32 && v.every(shortLine) ? v : undefined
  if (kind !== 'text' || !shortLine(v)) return undefined
  // A route is a template (`/items/{id}`); one sent with its query keeps the path only.
  return key === 'http.route' ? v.split('?')[0] : v
}

/** The attributes that `minimal` keeps (of a span or its events, or of its resource). */
function minimalOf (a: Attributes, resource = false): Attributes {
  const out: Attributes = {}
  for (const k in a) {
    const kind = minimalKind(k, resource)
    if (kind === null) continue
    const v = minimalValue(kind, k, a[k]!)
    if (v !== undefined) out[k] = v
  }
  return out
}

function minimalEventAttributes (name: string, a: Attributes): Attributes {
  const out = minimalOf(a)
  if (name === 'exception') {
    for (const k of ['exception.type', 'exception.message', 'exception.escaped']) if (a[k] !== undefined) out[k] = a[k]!
  }
  return out
}

/** An object of the Vercel AI SDK's `ai.prompt` keys (`system`, `prompt`, `messages`), and only those. */
function isCallPrompt (v: unknown): v is { system?: unknown; prompt?: unknown; messages?: unknown } {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false
  const keys = Object.keys(v)
  return keys.length > 0 && keys.every((k) => k === 'system' || k === 'prompt' || k === 'messages')
}

/** A JSON text attribute (the conventions send message lists as JSON strings) parsed, else as it is. */
function jsonish (v: AttrValue | undefined): unknown {
  if (typeof v !== 'string') return v
  const t = v.trimStart()
  if (t.startsWith('[') || t.startsWith('{')) {
    try {
      return JSON.parse(v)
    } catch {
      return v
    }
  }
  return v
}

/** The first of these attributes that is a non-empty string. */
function str (a: Attributes, ...keys: string[]): string | undefined {
  for (const k of keys) {
    const v = a[k]
    if (typeof v === 'string' && v !== '') return v
  }
  return undefined
}

/** The first of these attributes that is a non-negative number (or a string of digits), as an integer. */
function count (a: Attributes, ...keys: string[]): number | undefined {
  for (const k of keys) {
    const v = a[k]
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : NaN
    if (Number.isFinite(n) && n >= 0) return Math.min(Math.round(n), MAX_TOKENS)
  }
  return undefined
}

/** At most max UTF-16 units; a surrogate pair split by the cut becomes U+FFFD. */
function cut (s: string, max: number): string {
  return s.length <= max ? s : wellFormed(s.slice(0, max))
}
