import { ClientError } from "./client-error.ts";
import type { FollowRenderer } from "./follow-renderer.ts";
import { jobEvents, type JobEvent } from "./job-events.ts";
import type { JobView } from "./wire.ts";
import type { WorkerClient } from "./worker-client.ts";

/** Draws a job's events until its terminal event and answers the final view. */
export async function followJob(client: WorkerClient, id: string, renderer: FollowRenderer): Promise<JobView> {
  for await (const event of eventsOf(client, id)) {
    if (event.kind === "heartbeat") continue;
    if (event.kind === "end") {
      renderer.finish(event.view);
      return event.view;
    }
    renderer.show(event.view);
  }
  throw new ClientError("unreachable", `the event stream of job ${id} ended without its final event`);
}

// The caller has just read the job, so a 404 here is the stream route missing, not the job.
export async function* eventsOf(client: WorkerClient, id: string): AsyncGenerator<JobEvent> {
  try {
    yield* jobEvents(client, id);
  } catch (err) {
    if (err instanceof ClientError && err.kind === "no_such_job") {
      throw new ClientError("refused", `this worker has no event stream (GET /train/${id}/events answered 404); upgrade it or use status without --follow`);
    }
    throw err;
  }
}
