import { isActive } from "../job.ts";
import type { ResumeFrom } from "../recipe/command.ts";
import { saveEvery } from "../recipe/samples.ts";
import { baseModelChange, baseModelPrint } from "../request/base-model.ts";
import type { CheckedTrain } from "../request/check.ts";
import { isStrictlyInside, realOrNull } from "../request/contained-path.ts";
import { fail, ok, type Result } from "../result.ts";
import type { Job, JobStore } from "../store/job-store.ts";
import { usableState } from "../supervisor/index.ts";
import { jobsDir } from "../job-dir/job-dir.ts";
import { TIERS } from "../tiers.ts";
import type { DispatchRefusal, Refused } from "./refusal.ts";

// Whether a job can be resumed, and from which state; what to answer when it was resumed already.
export function createResumeChecks(store: JobStore, stateDir: string) {
  // A resumed job is continued by the newest job of its chain: the answer names that one and what can be done with it.
  const alreadyResumed = (id: string, by: string | null): Refused => {
    if (by === null) {
      const detail = `job ${id} cannot be resumed: retention is removing its job directory`;
      return fail({ kind: "not_resumable", detail });
    }
    let newest = store.get(by);
    while (newest?.resumed_by) newest = store.get(newest.resumed_by);
    const via = newest !== null && newest.id !== by ? `, continued by job ${newest.id}` : "";
    const detail = `job ${id} was already resumed by job ${by}${via}; ${nextFor(newest)}`;
    return fail({ kind: "not_resumable", detail });
  };
  const nextFor = (job: Job | null): string => {
    if (job === null) return "that job is not on record";
    if (isActive(job.status)) return `job ${job.id} is still ${job.status}`;
    if (job.status === "succeeded") return `job ${job.id} succeeded; there is nothing left to train`;
    if (job.resume_state !== null && job.pruned_at === null) return `resume job ${job.id} instead`;
    return `job ${job.id} ${job.status} and cannot be resumed either (${job.resume_gone ?? "it holds no saved state"})`;
  };

  // A state in the worker's own tree, where it was verified; an older version saved states into output_dir.
  const ownedState = (state: string): boolean => {
    const [jobs, real] = [realOrNull(jobsDir(stateDir)), realOrNull(state)];
    return jobs !== null && real !== null && isStrictlyInside(jobs, real);
  };
  // The run goes on from weights trained on the base model recorded at the chain's start: a file replaced since
  // would resume onto another model.
  const baseModelReplaced = async (job: Job, train: CheckedTrain): Promise<Refused | null> => {
    if (job.base_model_print === null) return null;
    const change = baseModelChange(job.base_model_print, await baseModelPrint(train.baseModel));
    if (change === null) return null;
    const detail = `job ${job.id} cannot be resumed: base_model_path ${train.request.base_model_path} is not the ` +
      `file the run started on (${change}); dispatch a new run instead`;
    return fail({ kind: "base_model_changed", detail });
  };

  // A resume continues a failed or cancelled job from its newest verified state, on its dataset copy.
  const resumable = async (job: Job): Promise<Result<ResumeFrom, DispatchRefusal>> => {
    const refuse = (why: string): Refused =>
      fail({ kind: "not_resumable", detail: `job ${job.id} cannot be resumed: ${why}` });
    if (job.resumed_by !== null) return alreadyResumed(job.id, job.resumed_by);
    if (isActive(job.status)) return refuse(`it is still ${job.status}; pause it first (POST /train/${job.id}/pause)`);
    if (job.status === "succeeded") return refuse("it succeeded; there is nothing left to train");
    if (job.pruned_at !== null) return refuse("its job directory (with its dataset copy) was pruned by retention");
    if (job.resume_state === null || job.resume_step === null) {
      const { tier } = job.request;
      const every = saveEvery(TIERS[tier], (job.request.samples ?? 0) > 0);
      const why = `it saved no state before it ended (a ${tier} run saves one every ${every} steps)`;
      return refuse(job.resume_gone ?? why);
    }
    const at = `its saved state at step ${job.resume_step}`;
    if (!ownedState(job.resume_state) || job.resume_digest === null) {
      return refuse(`${at} lies outside the worker's run directories (an older version saved it into output_dir)`);
    }
    // Whole and finite again, and byte for byte the files that were verified.
    const usable = await usableState(job.resume_state, job.resume_step);
    if (!usable.ok) return refuse(`${at} can no longer be used: ${usable.error}`);
    if (usable.value !== job.resume_digest) return refuse(`${at} changed after the worker verified it`);
    return ok({ state: job.resume_state, step: job.resume_step, repeatsScale: 1 });
  };

  return { alreadyResumed, baseModelReplaced, resumable };
}
