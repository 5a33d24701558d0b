import { openApiDocument } from "../api/openapi-document.ts";
import { BUILD } from "../version.ts";
import { UsageError } from "./args.ts";

// The document GET /openapi.json serves, from the same code and version, with no server, config or token: what a
// CI job generates a client from without holding the worker's secret.
export function openapiCommand(argv: string[]): number {
  if (argv.length > 0) throw new UsageError(`openapi takes no arguments, got ${JSON.stringify(argv[0])}`);
  process.stdout.write(`${JSON.stringify(openApiDocument(BUILD.version), null, 2)}\n`);
  return 0;
}
