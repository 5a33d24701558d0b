const RETRY_MS = 250;

// Work that must happen (stopping a job's processes) is retried while the host says no (no descriptor
// left, say); the first refusal is reported, the rest would only repeat it.
export async function untilDone<T>(work: () => Promise<T>, onFirstFailure: (err: Error) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (attempt === 0) onFirstFailure(err as Error);
      await Bun.sleep(RETRY_MS);
    }
  }
}
