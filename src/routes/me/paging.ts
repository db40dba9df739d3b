import { pageStart, type CursorList, type PageStart } from '../../domain/cursor.ts'
import { invalidCursor } from '../../errors.ts'

/**
 * Where the requested page of a list starts: a new walk reads the rows as they stood at `settledAt`
 * (the request's snapshot instant); a cursor this list did not hand out is a 400.
 */
export function startOf(list: CursorList, cursor: string | undefined, settledAt: number): PageStart {
  const start = pageStart(list, cursor, settledAt)
  if (!start) throw invalidCursor()
  return start
}
