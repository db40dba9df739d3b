/**
 * A clock that moves only when a test moves it: passed as the `now` option of the code that measures
 * time (SharedCache, LeasedLimiter), it lets a test pass seconds of lifetimes and back-offs at once.
 */
export interface TestClock {
  now(): number
  /** Moves the clock `ms` forward. */
  advance(ms: number): void
}

export function testClock (start = Date.now()): TestClock {
  let at = start
  return {
    now: () => at,
    advance (ms: number) {
      at += ms
    },
  }
}
