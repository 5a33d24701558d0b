import { readFileSync, statSync, type Stats } from "node:fs";
import { parseTokenLines } from "../auth/token-lines.ts";
import type { Config } from "../config/schema.ts";
import { fail, fromProblems, warn, type CheckResult } from "./check-result.ts";
import { holdsFor, type RunAs, type ServiceAccount } from "./service-account.ts";

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, "0");

/** The API tokens: one per line, readable by the worker, by nobody outside root and the service group. */
export async function checkTokenFile(config: Config, account: ServiceAccount, runAs: RunAs): Promise<CheckResult> {
  const name = "token file";
  if (config.auth.mode === "none") {
    return warn(name, 'auth.mode is "none": every client that reaches the port can start, read and cancel jobs', 'set auth.mode = "token"');
  }
  const file = config.auth.token_file;
  const safe = `chown root:${account.group} ${file} && chmod 0640 ${file}`;
  let st: Stats;
  try {
    st = statSync(file);
  } catch {
    return fail(name, `${file} does not exist`, "install.sh creates it (32 random bytes, hex)");
  }
  if (!st.isFile()) return fail(name, `${file} is not a regular file`, "replace it with a file holding one token per line");
  const problems: string[] = [];
  if (st.mode & 0o007) problems.push(`${file} is mode ${octal(st.mode)}, open to every user`);
  if (st.uid !== 0 && st.uid !== account.uid) problems.push(`${file} is owned by uid ${st.uid}, not root or ${account.user}`);
  if (!(await holdsFor(runAs, ["-r", file]))) problems.push(`${file} is not readable by ${account.user}`);
  const unusable = problems.length === 0 ? tokenProblems(file) : [];
  if (unusable.length > 0) return fail(name, unusable.join("; "), `write one token a line, as serve reads them: umask 077; openssl rand -hex 32 > ${file}`);
  return fromProblems(name, problems, [safe], `${file} is ${octal(st.mode)}, owner uid ${st.uid}, readable by ${account.user}`);
}

// The same parser serve uses, so doctor passes exactly the files serve accepts.
function tokenProblems(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return []; // unreadable by doctor itself (not root): the readability check above speaks for the worker
  }
  const parsed = parseTokenLines(text, file);
  return parsed.ok ? [] : parsed.errors;
}
