export type CheckStatus = "OK" | "WARN" | "FAIL";

/** One line of `lora-worker doctor`: what was checked, what was found, and for WARN/FAIL what to do. */
export interface CheckResult {
  status: CheckStatus;
  name: string;
  detail: string;
  fix?: string;
}

export const ok = (name: string, detail: string): CheckResult => ({ status: "OK", name, detail });

export const warn = (name: string, detail: string, fix?: string): CheckResult => ({ status: "WARN", name, detail, ...(fix ? { fix } : {}) });

export const fail = (name: string, detail: string, fix: string): CheckResult => ({ status: "FAIL", name, detail, fix });

/** Several problems found by one check become one FAIL line; none is an OK line. */
export function fromProblems(name: string, problems: string[], fixes: string[], okDetail: string): CheckResult {
  if (problems.length === 0) return ok(name, okDetail);
  return fail(name, problems.join("; "), fixes.join("; "));
}
