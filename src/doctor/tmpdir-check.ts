import { dirname, join } from "node:path";
import { statOrNull } from "../fs.ts";
import { BASE_PATH } from "../recipe/command.ts";
import { jobsDir } from "../job-dir/job-dir.ts";
import { MAX_SOCKET_PATH, PYMP_SOCKET_SUFFIX, TMP_LINK_ROOT, tmpLink } from "../job-dir/tmp-link.ts";
import { failed, passed, warned, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import { holdsFor } from "./service-account.ts";
import { whyStopped } from "./trainer-checks.ts";

const NAME = "trainer tmpdir";
// Python's start and one socket: seconds at worst.
const SOCKETS_DEADLINE_MS = 20_000;
const SOCKETS_OK = "lora-worker-doctor sockets ok";
// What torch's data-loader worker does first: multiprocessing binds an AF_UNIX listener under TMPDIR.
const SOCKETS_PROGRAM = `from multiprocessing import reduction; import os
reduction.DupFd(os.open('/dev/null', os.O_RDONLY))
print(${JSON.stringify(SOCKETS_OK)})
`;
// A job's tmp folder and its link, as the shim makes them: a folder in the state dir, a link of a job's length.
const PROBE_SCRIPT = `set -e
target=$(mktemp -d "$1/.doctor-tmpdir.XXXXXX")
trap 'rm -f "$2"; rm -rf "$target"' EXIT
ln -s "$target" "$2"
TMPDIR="$2" "$3" -c "$4"
`;

/**
 * The trainer's TMPDIR (job-dir/tmp-link.ts): a link in /dev/shm the service user can make, into the state dir,
 * under which the venv's Python binds multiprocessing's sockets as a real run's data loader does.
 */
export async function checkTrainerTmpdir(deps: DoctorDeps, { sockets }: { sockets: boolean }): Promise<DoctorCheck> {
  const { config, account, runAs } = deps;
  if (!(await holdsFor(runAs, ["-d", TMP_LINK_ROOT, "-a", "-w", TMP_LINK_ROOT, "-a", "-x", TMP_LINK_ROOT]))) {
    const fix = `mount a tmpfs on ${TMP_LINK_ROOT} with mode 1777 ` +
      "(every Linux host has one; torch's data loader needs it too)";
    return failed(NAME, `${account.user} cannot make the trainer's TMPDIR link in ${TMP_LINK_ROOT}`, fix);
  }
  const link = tmpLink(join(jobsDir(config.state_dir), crypto.randomUUID()));
  const fits = `each job's TMPDIR is ${TMP_LINK_ROOT}/lora-worker-<job id>, a link to its folder in the state dir ` +
    `(${link.length + PYMP_SOCKET_SUFFIX} of ${MAX_SOCKET_PATH} bytes with Python's socket names)`;
  if (!sockets) return passed(NAME, `${fits}; sockets not tried: the simulator opens none`);
  if (!statOrNull(config.state_dir)?.isDirectory()) return warned(NAME, `${fits}; sockets not tried: no state dir`);
  const python = join(dirname(config.trainer.accelerate), "python");
  // Without the trainer's environment there is nothing to bind with; its own lines say how to bring it.
  if (!(await holdsFor(runAs, ["-x", python]))) {
    return warned(NAME, `${fits}; sockets not tried: ${account.user} cannot run ${python} (see accelerate)`);
  }
  const run = await runAs(["sh", "-c", PROBE_SCRIPT, "sh", config.state_dir, link, python, SOCKETS_PROGRAM], {
    env: { PATH: `${dirname(python)}:${BASE_PATH}` },
    timeoutMs: SOCKETS_DEADLINE_MS,
  });
  const who = `${python} as ${account.user}`;
  const bound = run.exitCode === 0 && run.stdout.includes(SOCKETS_OK);
  if (bound) return passed(NAME, `${fits}; ${who} binds its sockets there`);
  const fix = `the state dir's filesystem must take AF_UNIX sockets, and ${account.user} must write ${TMP_LINK_ROOT}`;
  const why = whyStopped(run, SOCKETS_DEADLINE_MS);
  return failed(NAME, `${who} could not bind multiprocessing's sockets under such a TMPDIR: ${why}`, fix);
}
