/** One event ready to send: its JSON text (scrubbed and validated), its UTF-8 size, its order of arrival. */
export interface Item { json: string; bytes: number; seq: number }

/**
 * A first-in first-out queue of items with O(1) push, shift and unshift (a head index into an array,
 * compacted now and then), and a running byte total. Dropping the oldest item on overflow is a
 * shift, so a full queue under a stalled service costs the same per event as an empty one.
 */
export class ItemQueue {
  private items: Item[] = []
  private head = 0
  bytes = 0

  get length (): number { return this.items.length - this.head }

  peek (): Item | undefined { return this.items[this.head] }

  push (item: Item): void {
    this.items.push(item)
    this.bytes += item.bytes
  }

  shift (): Item | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]!
    this.items[this.head] = undefined as unknown as Item
    this.head++
    this.bytes -= item.bytes
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }

  /** Puts items back at the front, in their order (events refused for now, to be sent first). */
  unshiftAll (items: Item[]): void {
    if (items.length <= this.head) {
      for (let i = items.length - 1; i >= 0; i--) this.items[--this.head] = items[i]!
    } else {
      this.items = [...items, ...this.items.slice(this.head)]
      this.head = 0
    }
    for (const item of items) this.bytes += item.bytes
  }

  /** Takes up to `max` items and at most `maxBytes` of JSON (always at least one item). */
  take (max: number, maxBytes: number): Item[] {
    const out: Item[] = []
    let bytes = 0
    while (out.length < max && this.length > 0) {
      const next = this.peek()!
      if (out.length > 0 && bytes + next.bytes + 1 > maxBytes) break
      bytes += next.bytes + 1
      out.push(this.shift()!)
    }
    return out
  }
}
