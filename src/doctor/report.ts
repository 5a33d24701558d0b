import type { CheckResult } from "./check-result.ts";

export function formatCheck(check: CheckResult): string {
  const fix = check.fix ? ` — fix: ${check.fix}` : "";
  return `${check.status.padEnd(4)} ${check.name}: ${check.detail}${fix}`;
}

export function formatSummary(checks: CheckResult[]): string {
  const count = (status: CheckResult["status"]) => checks.filter((c) => c.status === status).length;
  return `doctor: ${count("FAIL")} FAIL, ${count("WARN")} WARN, ${count("OK")} OK`;
}

export const hasFailure = (checks: CheckResult[]): boolean => checks.some((c) => c.status === "FAIL");
