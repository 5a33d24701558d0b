// Waits for a condition with a deadline instead of sleeping a fixed time.
export async function waitFor<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) return last as NonNullable<T>;
    await Bun.sleep(10);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
}

// The promise's value, or "deadline" if it has not settled within `ms`: for what must not happen in time as well.
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | "deadline"> {
  let timer: Timer | undefined;
  const deadline = new Promise<"deadline">((resolve) => (timer = setTimeout(resolve, ms, "deadline")));
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
