import { constants } from "node:fs";
import { mayAccess } from "../../fs.ts";
import { locateTokenSource, readTokenSource } from "../../auth/tokens.ts";
import { UsageError } from "../args.ts";
import type { Address } from "./worker-client.ts";

export const ADDRESS_OPTIONS = ["url", "token", "config"] as const;

export const ADDRESS_HELP = `Which worker (each piece: a flag, else the environment, else the config, else the default):
  --url URL         the worker, e.g. http://127.0.0.1:8203          (env LORA_WORKER_URL)
  --token TOKEN     its bearer token                                (env LORA_WORKER_TOKEN)
  --config FILE     the worker's own config: the URL from listen (0.0.0.0 dialed as 127.0.0.1, [::] as [::1])
                    and the first token of its token source ($CREDENTIALS_DIRECTORY/token, else auth.token_file)
                    (env LORA_WORKER_CONFIG; without either, /etc/lora-worker/config.toml when readable, whose
                    token is sent only to the URL it names)
  default           http://127.0.0.1:8203 without a token
`;

const DEFAULT_URL = "http://127.0.0.1:8203";
const URL_ENV = "LORA_WORKER_URL";
const TOKEN_ENV = "LORA_WORKER_TOKEN";
const CONFIG_ENV = "LORA_WORKER_CONFIG";
const DEFAULT_CONFIG = "/etc/lora-worker/config.toml";
const BEARER_TOKEN = /^[\x21-\x7e]+$/; // what an Authorization header can carry

interface AddressFlags {
  url?: string;
  token?: string;
  config?: string;
}

type Env = Record<string, string | undefined>;

// Each piece: flag > environment > --config (or $LORA_WORKER_CONFIG) > the default config if readable > default.
// The default config's token goes only to the URL that config names: an explicit --url elsewhere must not get it.
export async function resolveAddress(flags: AddressFlags, env: Env): Promise<Address> {
  const url = flags.url ?? nonEmpty(env[URL_ENV]);
  const token = flags.token ?? nonEmpty(env[TOKEN_ENV]);
  const explicitConfig = flags.config ?? nonEmpty(env[CONFIG_ENV]);
  const configPath = explicitConfig ?? (mayAccess(DEFAULT_CONFIG, constants.R_OK) ? DEFAULT_CONFIG : undefined);
  if ((url !== undefined && token !== undefined) || configPath === undefined) {
    return { url: checkedUrl(url ?? DEFAULT_URL), token: checkedToken(token ?? null) };
  }
  const worker = await workerAddress(configPath, env);
  const resolved = checkedUrl(url ?? worker.url ?? portZero(configPath));
  const sameOrigin = worker.url !== null && new URL(resolved).origin === new URL(worker.url).origin;
  const mayUseConfigToken = explicitConfig !== undefined || sameOrigin;
  return { url: resolved, token: checkedToken(token ?? (mayUseConfigToken ? worker.readToken() : null)) };
}

interface WorkerAddress {
  // null when `listen` has port 0: only the running worker knows its port.
  url: string | null;
  readToken(): string | null;
}

async function workerAddress(path: string, env: Env): Promise<WorkerAddress> {
  const { loadConfig } = await import("../../config/load.ts");
  // The loader leaves the client's own two names (CLIENT_ENV) alone.
  const loaded = await loadConfig({ path, env, hostPaths: false });
  if (!loaded.ok) {
    const problems = loaded.error.map((e) => `  - ${e}`).join("\n");
    throw new UsageError(`cannot use the worker's config ${path}:\n${problems}`);
  }
  const { listen, auth } = loaded.value.config;
  return {
    url: listen.url,
    readToken: () => (auth.mode === "none" ? null : tokenOf(auth.token_file, env.CREDENTIALS_DIRECTORY)),
  };
}

// The first token of the worker's own source: what the worker accepts, read the way it reads it.
function tokenOf(tokenFile: string, credentialsDirectory: string | undefined): string | null {
  const located = locateTokenSource(tokenFile, credentialsDirectory);
  if (!located.ok) throw new UsageError(`${located.error}; pass --token or ${TOKEN_ENV}`);
  if (located.value === null) return null;
  const read = readTokenSource(located.value);
  if (!read.ok) {
    throw new UsageError(`cannot take the worker's token: ${read.error.join("; ")}; pass --token or ${TOKEN_ENV}`);
  }
  return read.value[0]!;
}

function portZero(configPath: string): never {
  throw new UsageError(
    `listen in ${configPath} has port 0 (the worker picks a free port at start): pass --url or ${URL_ENV}`,
  );
}

function checkedUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`not a URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`the worker's URL must be http or https, got ${JSON.stringify(raw)}`);
  }
  return url.href.replace(/\/+$/, "");
}

function checkedToken(token: string | null): string | null {
  if (token !== null && !BEARER_TOKEN.test(token)) {
    throw new UsageError("the token holds spaces or characters a bearer token cannot carry");
  }
  return token;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === "" ? undefined : value;
}
