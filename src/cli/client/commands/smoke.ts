import { rm } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { SMOKE_FOLDER } from "../../../smoke/dataset.ts";
import { pinChain } from "../../../pinned-dir.ts";
import { loraProblem, pngSize } from "../../../smoke/verify.ts";
import { TIERS } from "../../../tiers.ts";
import { UsageError } from "../../args.ts";
import { counted } from "../../../counted.ts";
import { followJob } from "../follow.ts";
import { verdictText } from "../likeness-rows.ts";
import { outcomeLines } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import { EXIT } from "../exit.ts";
import type { JobView, WorkerClient } from "../worker-client.ts";

const { maxTrainSteps: STEPS, checkpointEvery: FIRST_STATE } = TIERS.smoke;

export const smoke: ClientCommand = {
  help: `Proves this deployment trains: asks the worker for a smoke run (the fast tier's recipe cut to ${STEPS} steps
with a state every ${FIRST_STATE}, on a small dataset the worker writes into the handoff root, on smoke.base_model),
pauses it at its first saved state, resumes it from there, lets it finish, checks the LoRA (sha256, whole, finite
weights, sd-scripts' metadata) and the preview image, reads the likeness verdict (its dataset holds two photos of
a face; a verdict other than learned is information, only a face scorer that failed fails it), and removes the
run's folder. One line per stage.
--device N: the device to train on (needed when the worker has more than one). Run it on the worker's host,
where the LoRA can be read. The jobs stay in the history with tier smoke.
Exit: 0 when every stage passed; 1 when one failed (its line says why); 5 refused (busy, no smoke.base_model).`,
  values: ["device"],
  flags: [],
  async run({ client, out, options }) {
    if (options.positional.length > 0) throw new UsageError("smoke takes no arguments");
    const device = deviceOption(options.values.device);
    const started = Date.now();
    const stages = smokeStages(client, device);
    let failed = false;
    for (const stage of stages) {
      const t0 = Date.now();
      const result: Attempt | null = failed && stage.name !== "clean" ? null : await attempt(stage);
      const took = `${((Date.now() - t0) / 1000).toFixed(1)}s`.padStart(7);
      if (result === null) out.write(`SKIP ${stage.name.padEnd(8)}\n`);
      else out.write(`${result.ok ? "PASS" : "FAIL"} ${stage.name.padEnd(8)} ${took}  ${result.detail}\n`);
      failed ||= result?.ok === false;
    }
    const total = ((Date.now() - started) / 1000).toFixed(1);
    out.write(`smoke: ${failed ? "FAILED" : "passed"} in ${total}s\n`);
    return failed ? EXIT.jobFailed : EXIT.ok;
  },
};

interface Stage {
  name: string;
  // The detail of a pass; a failure throws StageFailed with the line that decides it.
  run(): Promise<string>;
}

class StageFailed extends Error {}

interface Attempt {
  ok: boolean;
  detail: string;
}

async function attempt(stage: Stage): Promise<Attempt> {
  try {
    return { ok: true, detail: await stage.run() };
  } catch (err) {
    if (err instanceof StageFailed) return { ok: false, detail: err.message };
    throw err;
  }
}

function deviceOption(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,2}$/.test(raw)) throw new UsageError(`--device must be a device index, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

// The stages share what the earlier ones learnt: the first job, its successor, the final record.
function smokeStages(client: WorkerClient, device: number | undefined): Stage[] {
  let first: JobView | null = null;
  let last: JobView | null = null;
  const ended = (view: JobView) => outcomeLines(view).join(" / ");
  return [
    {
      name: "dispatch",
      async run() {
        const body = JSON.stringify(device === undefined ? {} : { device_index: device });
        const { worker_job_id: id } = await client.smoke(body);
        first = await client.job(id);
        const where = `job ${id} on device ${first.request.device_index}, base model ${first.request.base_model_path}`;
        // A simulated trainer proves the worker, not the venv, sd-scripts or the GPU.
        return first.simulated ? `${where} (SIMULATED trainer: trainer.mode is "simulate")` : where;
      },
    },
    {
      name: "pause",
      async run() {
        first = await client.pause(first!.worker_job_id);
        if (!first.paused || first.resume_step !== FIRST_STATE) {
          throw new StageFailed(`job ${first.worker_job_id} did not pause at step ${FIRST_STATE}: ${ended(first)}`);
        }
        return `paused at its first saved state, step ${first.resume_step}`;
      },
    },
    {
      name: "resume",
      async run() {
        const resumed = await client.resume(first!.worker_job_id);
        last = await followJob(client, resumed.worker_job_id, { show() {}, finish() {} });
        if (last.status !== "succeeded") throw new StageFailed(`job ${last.worker_job_id} ${ended(last)}`);
        return `job ${last.worker_job_id} went on from step ${resumed.resume_step} to ${last.step} and succeeded`;
      },
    },
    {
      name: "lora",
      async run() {
        const view = last!;
        const want = { path: view.lora_path!, sha256: view.lora_sha256!, networkDim: TIERS.smoke.networkDim };
        const problem = await loraProblem(want);
        if (problem !== null) throw new StageFailed(problem);
        return `${view.lora_path}: whole, finite, sha256 ${view.lora_sha256!.slice(0, 12)}…, sd-scripts' metadata`;
      },
    },
    {
      name: "sample",
      async run() {
        const sample = last!.samples.at(-1);
        if (sample === undefined) throw new StageFailed(`job ${last!.worker_job_id} lists no preview image`);
        const size = pngSize(await client.sample(sample.url));
        if (typeof size === "string") throw new StageFailed(`${sample.name} is ${size}`);
        return `${sample.name}: a ${size.width}x${size.height} PNG drawn at step ${sample.step}`;
      },
    },
    {
      name: "likeness",
      async run() {
        const { likeness, dataset, worker_job_id: id } = last!;
        if (likeness?.verdict == null) throw new StageFailed(`job ${id} has no likeness verdict`);
        if (likeness.reason === "scorer_failed") {
          throw new StageFailed("the face scorer failed (the worker's log says why)");
        }

        const identity = dataset?.prepared?.identity;
        const faces = identity === undefined ? "" : `; the dataset's faces: ${identity.text}`;
        const scored = counted(likeness.points.length, "point");
        return `${verdictText(likeness.verdict, likeness.reason)} (${scored} scored)${faces}`;
      },
    },
    {
      name: "clean",
      async run() {
        const job = last ?? first;
        if (job === null) return "nothing was written";
        const folder = dirname(job.request.dataset_dir);
        if (basename(dirname(folder)) !== SMOKE_FOLDER) throw new StageFailed(`${folder} is not a smoke run's folder`);
        try {
          await removeRunFolder(folder);
        } catch (err) {
          throw new StageFailed(`could not remove ${folder}: ${(err as Error).message}`);
        }
        return `removed ${folder}`;
      },
    },
  ];
}

// The run's folder is removed in the smoke folder as opened from the handoff root, never through a link laid
// there since (this command may run as root).
async function removeRunFolder(folder: string): Promise<void> {
  await using smoke = await pinChain(dirname(dirname(folder)), [SMOKE_FOLDER]);
  await rm(smoke.at(basename(folder)), { recursive: true, force: true });
}
