import type { IncomingEvent } from '../../domain/event-row.ts'
import { invalidText, validationFailed, type HttpError } from '../../http-error.ts'
import { toDetails, validateEvent } from '../../validation.ts'
import type { IngestionStep, IngestRun, IngestVerdict } from './ingest-run.ts'

/**
 * `schema`: the body parser's input-rule problems, the event schema, and an agent to send for. The
 * one check of an event's body, for one event or 500, and for OTLP spans once mapped: the ingest
 * routes document the body in their schema but compile no validator for it (see src/validation.ts).
 */
export function schemaStep (): IngestionStep {
  return {
    name: 'schema',
    run: (run, items) => items.map((item): IngestVerdict => {
      const problem = run.refusalOf(item.index) ?? check(run, item.event)
      return problem ? { kind: 'refused', error: problem } : undefined
    }),
  }
}

function check (run: IngestRun, event: unknown): HttpError | null {
  if (!validateEvent(event)) return run.invalid(toDetails(validateEvent.errors))
  if ((event as IncomingEvent).agentId === undefined && run.caller.agentId === null) {
    return validationFailed([{ path: ['agentId'], message: 'is required when the API key is not bound to an agent' }])
  }
  // An agent's name is kept in Postgres, which refuses NUL: refused here, so that in a batch only
  // this event is (the store's refusal would fail the whole request).
  if ((event as IncomingEvent).agentId?.includes('\u0000')) return invalidText()
  return null
}
