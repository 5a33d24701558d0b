import { z } from "zod";
import type { Config, Listen } from "../config/schema.ts";
import type { Logger } from "../logger.ts";
import { fail, ok, type Result } from "../result.ts";
import {
  CREDENTIAL_NAMES, locateTokenSource, readTokenSource, reloadingTokens, type TokenSet, type TokenSource,
} from "./tokens.ts";

// "none-loopback": auth.mode is "token" but no token exists and the bind is loopback, so the worker runs open.
export const AuthMode = z.enum(["token", "none", "none-loopback"]);
export type AuthMode = z.infer<typeof AuthMode>;

export interface AuthGate {
  mode: AuthMode;
  tokens: TokenSet | null;
  source: TokenSource | null;
  /** Tokens that read and never act (auth.read_token_file): null where there are none, or no token is needed. */
  readTokens: TokenSet | null;
  readSource: TokenSource | null;
  metricsPublic: boolean;
}

// The error: why the worker must not start, one line a problem.
type AuthSetup = Result<AuthGate, string[]>;

interface AuthInputs {
  config: Pick<Config, "auth" | "listen">;
  credentialsDirectory: string | undefined;
  log: Logger;
}

export function setUpAuth({ config, credentialsDirectory, log }: AuthInputs): AuthSetup {
  const { auth, listen } = config;
  const gate = (mode: AuthMode, source: TokenSource | null, tokens: TokenSet | null): AuthSetup =>
    ok({ mode, tokens, source, readTokens: null, readSource: null, metricsPublic: auth.metrics_public });
  if (auth.mode === "none") return gate("none", null, null);
  const located = locateTokenSource(auth.token_file, credentialsDirectory);
  if (!located.ok) return fail([located.error]);
  const source = located.value;
  if (source === null) {
    return listen.loopback ? gate("none-loopback", null, null) : fail(noTokenHelp(listen, auth.token_file));
  }
  const read = readTokenSource(source);
  if (!read.ok) return read;
  // A token acts or reads, never both: refused at start, and each set refuses a reload sharing one with the other.
  let tokens: TokenSet | null = null;
  const readers =
    readOnlyTokens(auth.read_token_file, credentialsDirectory, log, sharedWith(() => tokens, source.path));
  if (!readers.ok) return readers;
  const { readTokens, readSource } = readers.value;
  if (readTokens !== null && read.value.some((t) => readTokens.holds(t))) {
    return fail([`a token stands in both ${source.path} and ${readSource!.path}: a token either acts or only ` +
      "reads; remove it from one of the two"]);
  }
  const refuse = sharedWith(() => readTokens, readSource?.path ?? "");
  tokens = reloadingTokens(source, read.value, log, { onLoss: "keep", refuse });
  return ok({ mode: "token", tokens, source, readTokens, readSource, metricsPublic: auth.metrics_public });
}

function sharedWith(other: () => TokenSet | null, otherPath: string) {
  return (got: readonly string[]) =>
    got.some((t) => other()?.holds(t)) ? `a token of it stands in ${otherPath} too` : null;
}

// The readers' tokens, found and checked as the others are; none is no error (a worker has no screens to serve).
function readOnlyTokens(
  file: string,
  credentialsDirectory: string | undefined,
  log: Logger,
  refuse: (tokens: readonly string[]) => string | null,
): Result<Pick<AuthGate, "readTokens" | "readSource">, string[]> {
  const located = locateTokenSource(file, credentialsDirectory, CREDENTIAL_NAMES.read);
  if (!located.ok) return fail([located.error]);
  const source = located.value;
  if (source === null) return ok({ readTokens: null, readSource: null });
  const read = readTokenSource(source);
  if (!read.ok) return read;
  // Removing the file, or breaking it, revokes every read token: a reload never widens access.
  const readTokens = reloadingTokens(source, read.value, log, { onLoss: "revoke", refuse });
  return ok({ readTokens, readSource: source });
}

function noTokenHelp(listen: Listen, tokenFile: string): string[] {
  return [
    `listen = "${listen.text}" is not a loopback address and no bearer token is configured ` +
      `(neither ${tokenFile} nor $CREDENTIALS_DIRECTORY/token exists)`,
    "create one, readable only by the worker's user, and give the same token to arbo:  " +
      `umask 077; openssl rand -hex 32 > ${tokenFile}`,
    `or pass one with systemd: LoadCredential=token:/path/to/token in the unit`,
    `or, to run without authentication on purpose, set auth.mode = "none" (LORA_WORKER_AUTH_MODE=none)`,
  ];
}
