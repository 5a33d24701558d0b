import { dirname } from "node:path";
import type { JobRow } from "../store/job-store.ts";

// The job directory is where its log lives; the record keeps the log's path.
export function jobDirOf(row: JobRow): string {
  return dirname(row.log_path);
}
