import { pageStart, type CursorList, type Page, type PageStart } from '../../src/domain/cursor.ts'

/**
 * Every item of a walk over a repository's pages, each page read from the cursor of the one before
 * (as the routes page), from a first page at `asOf`. Fails when the walk does not end.
 */
export async function walkPages<T> (list: CursorList, asOf: number, read: (start: PageStart) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = []
  let start: PageStart = { asOf, after: null }
  for (let pages = 0; pages < 1000; pages++) {
    const page = await read(start)
    items.push(...page.items)
    if (!page.nextCursor) return items
    start = pageStart(list, page.nextCursor, 0)!
  }
  throw new Error('the walk did not end')
}
