// A client of a server-sent event stream that keeps reading in the background, as the status page or
// `lora-worker status --follow` does, and notes how the stream ended.
export interface EventStream extends AsyncDisposable {
  /** The `event:` names received so far, in order. */
  events(): string[];
  /** Null while the stream is open; "end" when the server closed it cleanly, else the read error's message. */
  ending(): string | null;
}

export async function openEventStream(url: string): Promise<EventStream> {
  const abort = new AbortController();
  const res = await fetch(url, { signal: abort.signal, headers: { accept: "text/event-stream" } });
  if (res.status !== 200 || res.body === null) throw new Error(`${url} answered ${res.status}: ${await res.text()}`);
  const names: string[] = [];
  let ending: string | null = null;
  let buffered = "";
  const decoder = new TextDecoder();
  const reading = (async () => {
    try {
      for await (const chunk of res.body as ReadableStream<Uint8Array>) {
        buffered += decoder.decode(chunk, { stream: true });
        const blocks = buffered.split("\n\n");
        buffered = blocks.pop()!;
        for (const block of blocks) {
          const name = /^event: (.*)$/m.exec(block)?.[1];
          if (name !== undefined) names.push(name);
        }
      }
      ending = "end";
    } catch (err) {
      ending = (err as Error).message || String(err);
    }
  })();
  return {
    events: () => names,
    ending: () => ending,
    async [Symbol.asyncDispose]() {
      abort.abort();
      await reading;
    },
  };
}
