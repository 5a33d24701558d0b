import pkg from "../package.json" with { type: "json" };

// build.ts defines LORA_WORKER_BUILD; from source the version says so.
declare const LORA_WORKER_BUILD: { version: string; commit: string } | undefined;

export const BUILD = typeof LORA_WORKER_BUILD !== "undefined"
  ? LORA_WORKER_BUILD
  : { version: `${pkg.version}-source`, commit: "unknown" };
