import { describe, expect, test } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { createLogger } from "../../src/logger.ts";
import { reloadingTokens, TOKEN_CHECK_MS } from "../../src/auth/tokens.ts";
import { TOKEN_A, TOKEN_B, appBehind, gateFor, mustGate, writeTokens } from "../support/auth-setup.ts";
import { waitFor } from "../support/wait.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { isLoopbackListen } from "../support/listen.ts";

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const JOB = "3f1c2a4e-0000-4000-8000-000000000000";

describe("bearer auth on the HTTP surface", () => {
  test("the right token passes, one differing in its last character fails, and the second rotated token passes", async () => {
    using tree = makeHostTree();
    const gate = mustGate({ tokenFile: writeTokens(tree.root, ["# current", TOKEN_A, "", "# rotated in", TOKEN_B]) });
    await using a = appBehind(tree, gate);
    const statusWith = async (token: string) => (await a.app.request(`/train/${JOB}`, { headers: bearer(token) })).status;
    const lastCharChanged = `${TOKEN_A.slice(0, -1)}${TOKEN_A.endsWith("1") ? "2" : "1"}`;
    expect([await statusWith(TOKEN_A), await statusWith(lastCharChanged), await statusWith(TOKEN_B), await statusWith(TOKEN_A.slice(0, -1))]).toEqual([404, 401, 404, 401]);
  });

  test("a request without a token is 401 with a Bearer challenge before its body is read; with the token the body is read", async () => {
    using tree = makeHostTree();
    await using a = appBehind(tree, mustGate({ tokenFile: writeTokens(tree.root, [TOKEN_A]) }));
    const post = async (headers: Record<string, string>) => {
      let pulled = false;
      const body = new ReadableStream({
        pull(controller) {
          pulled = true;
          controller.enqueue(new TextEncoder().encode("{}"));
          controller.close();
        },
      }, { highWaterMark: 0 }); // pulled only when someone reads
      const res = await a.app.request("/train", { method: "POST", headers: { "content-type": "application/json", ...headers }, body, duplex: "half" } as RequestInit);
      return { status: res.status, challenge: res.headers.get("www-authenticate"), body: await res.json(), pulled };
    };
    expect(await post({})).toEqual({
      status: 401, challenge: 'Bearer realm="lora-worker"', pulled: false,
      body: { detail: "a bearer token is required: send Authorization: Bearer <token>" },
    });
    expect(await post(bearer(TOKEN_A))).toMatchObject({ status: 422, pulled: true });
  });

  test("every route but /healthz answers 401 without a token, and /healthz says auth_mode token", async () => {
    using tree = makeHostTree();
    await using a = appBehind(tree, mustGate({ tokenFile: writeTokens(tree.root, [TOKEN_A]) }));
    const routes: Array<[string, string]> = [
      ["POST", "/train"], ["GET", `/train/${JOB}`], ["GET", `/train/${JOB}/log`], ["POST", `/train/${JOB}/cancel`],
      ["GET", "/gpu-status"], ["GET", "/metrics"], ["GET", "/nope"], ["DELETE", "/healthz"], ["GET", "/healthz/"], ["GET", "/train"],
    ];
    for (const [method, path] of routes) {
      const res = await a.app.request(path, { method });
      expect({ route: `${method} ${path}`, status: res.status, challenge: res.headers.get("www-authenticate") }).toEqual({ route: `${method} ${path}`, status: 401, challenge: 'Bearer realm="lora-worker"' });
    }
    const health = await a.app.request("/healthz");
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok", auth_mode: "token" });
  });

  test("GET /metrics is open only when auth.metrics_public is true", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    await using closed = appBehind(tree, mustGate({ tokenFile }));
    await using open = appBehind(tree, mustGate({ tokenFile, metricsPublic: true }));
    expect([(await closed.app.request("/metrics")).status, (await open.app.request("/metrics")).status, (await open.app.request("/gpu-status")).status]).toEqual([401, 200, 401]);
  });

  test("a Basic or malformed Authorization header is 401 invalid_token, and the scheme's case does not matter", async () => {
    using tree = makeHostTree();
    await using a = appBehind(tree, mustGate({ tokenFile: writeTokens(tree.root, [TOKEN_A]) }));
    const statusOf = async (authorization: string) => {
      const res = await a.app.request(`/train/${JOB}`, { headers: { authorization } });
      return [res.status, res.headers.get("www-authenticate")];
    };
    const invalid = [401, 'Bearer realm="lora-worker", error="invalid_token"'];
    expect(await statusOf(`Basic ${btoa(`user:${TOKEN_A}`)}`)).toEqual(invalid);
    expect(await statusOf(`Bearer ${TOKEN_A} extra`)).toEqual(invalid);
    expect(await statusOf("Bearer")).toEqual(invalid);
    expect(await statusOf(`Bearer ${TOKEN_A}`)).toEqual([404, null]);
    expect(await statusOf(`bearer ${TOKEN_A}`)).toEqual([404, null]);
  });

  test("a token file edited in place takes effect without a restart; an edit that breaks it keeps the last good tokens", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const lines: string[] = [];
    await using a = appBehind(tree, mustGate({ tokenFile, log: createLogger("json", (l) => lines.push(l)) }));
    const statusWith = async (token: string) => (await a.app.request(`/train/${JOB}`, { headers: bearer(token) })).status;
    const both = async () => JSON.stringify([await statusWith(TOKEN_A), await statusWith(TOKEN_B)]);
    expect(await both()).toBe("[404,401]");
    // The file is looked at no more than once a second: each change takes effect within one.
    writeTokens(tree.root, [TOKEN_A, TOKEN_B]);
    await waitFor(async () => (await both()) === "[404,404]", "the rotated-in token to be valid");
    writeTokens(tree.root, [TOKEN_B]);
    await waitFor(async () => (await both()) === "[401,404]", "the rotated-out token to be refused");
    writeTokens(tree.root, ["# emptied by mistake"]);
    // Noticed by a request that comes after the interval, like every change.
    await waitFor(async () => (await both(), lines.length === 3), "the broken edit to be noticed");
    expect(await both()).toBe("[401,404]");
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["auth tokens reloaded", "auth tokens reloaded", "auth token change ignored; the previous tokens stay valid"]);
    expect(lines.join("")).not.toContain(TOKEN_A);
    expect(lines.join("")).not.toContain(TOKEN_B);
  });
});

describe("read-only tokens (auth.read_token_file)", () => {
  const READER = "r3ad+Only/t0ken-5a7c9e1b3d2f=";

  test("a read-only token reads every GET and is refused dispatch, pause, resume, cancel, smoke and a dataset check with 403 before the body is read, changing nothing; the full token acts", async () => {
    using tree = makeHostTree();
    const gate = mustGate({ tokenFile: writeTokens(tree.root, [TOKEN_A]), readTokenFile: writeTokens(tree.root, [READER], "read-token") });
    await using a = appBehind(tree, gate);
    const post = async (token: string, path: string, sent: unknown) => {
      let pulled = false;
      const body = new ReadableStream({
        pull(controller) {
          pulled = true;
          controller.enqueue(new TextEncoder().encode(JSON.stringify(sent)));
          controller.close();
        },
      }, { highWaterMark: 0 });
      const res = await a.app.request(path, { method: "POST", headers: { "content-type": "application/json", ...bearer(token) }, body, duplex: "half" } as RequestInit);
      return { status: res.status, body: (await res.json()) as any, pulled };
    };
    const acts: Array<[string, unknown]> = [
      ["/train", tree.validRequest()], [`/train/${JOB}/pause`, {}], [`/train/${JOB}/resume`, {}], [`/train/${JOB}/cancel`, {}], ["/smoke", {}],
      ["/dataset/check", tree.validRequest()],
    ];
    for (const [path, sent] of acts) {
      expect({ path, ...(await post(READER, path, sent)) }).toEqual({
        path, status: 403, pulled: false,
        body: { detail: `this token may only read (it is one of auth.read_token_file); POST ${path} needs a token of auth.token_file` },
      });
    }
    expect(await (await a.app.request("/train", { headers: bearer(READER) })).json()).toMatchObject({ jobs: [] });

    // Contrast: the full token dispatches; the reader then reads the job, its events, the list and the metrics.
    const dispatched = await post(TOKEN_A, "/train", tree.validRequest());
    expect(dispatched).toMatchObject({ status: 200, pulled: true });
    const id = dispatched.body.worker_job_id as string;
    for (const path of ["/train", `/train/${id}`, `/train/${id}/log`, `/train/${id}/metrics`, "/gpu-status", "/metrics", "/openapi.json"]) {
      const res = await a.app.request(path, { headers: bearer(READER) });
      expect({ path, status: res.status, access: res.headers.get("x-token-access") }).toEqual({ path, status: 200, access: "read" });
    }
    const events = await a.app.request(`/train/${id}/events`, { headers: bearer(READER) });
    expect([events.status, events.headers.get("content-type")]).toEqual([200, "text/event-stream"]);
    await events.body?.cancel();
    // The full token's answers are not marked: the page shows it every button.
    expect((await a.app.request(`/train/${id}`, { headers: bearer(TOKEN_A) })).headers.get("x-token-access")).toBeNull();
    expect((await post(TOKEN_A, `/train/${id}/cancel`, {})).status).toBe(200);
  });

  test("a read-only token is found like the others: systemd's read-token credential first, a bad line refuses setup, and none is no error", () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const credentials = join(tree.root, "credentials");
    writeTokens(credentials, [READER], "read-token");
    const gate = mustGate({ tokenFile, readTokenFile: writeTokens(tree.root, [TOKEN_B], "readers"), credentialsDirectory: credentials });
    expect(gate.readSource).toEqual({ kind: "systemd-credential", path: join(credentials, "read-token") });
    expect([gate.readTokens!.matches(READER), gate.readTokens!.matches(TOKEN_B), gate.tokens!.matches(READER)]).toEqual([true, false, false]);
    const bad = gateFor({ tokenFile, readTokenFile: writeTokens(tree.root, ["short"], "bad-readers") });
    expect(bad).toEqual({ ok: false, error: [`${join(tree.root, "bad-readers")} line 1: a token must be at least 16 characters`] });
    expect(mustGate({ tokenFile, readTokenFile: join(tree.root, "no-such-file") })).toMatchObject({ readTokens: null, readSource: null });
  });
});

describe("read-only tokens as strict as the others", () => {
  const READER = "r3ad+Only/t0ken-5a7c9e1b3d2f=";
  test("a token in both the token file and the read-token file refuses setup, naming both files and never the token", () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const readTokenFile = writeTokens(tree.root, [READER, TOKEN_A], "read-token");
    const refused = gateFor({ tokenFile, readTokenFile });
    expect(refused).toEqual({ ok: false, error: [`a token stands in both ${tokenFile} and ${readTokenFile}: a token either acts or only reads; remove it from one of the two`] });
    expect(JSON.stringify(refused)).not.toContain(TOKEN_A);
    // Contrast: the readers' own tokens alone set up.
    expect(mustGate({ tokenFile, readTokenFile: writeTokens(tree.root, [READER], "read-token") }).readTokens!.size).toBe(1);
  });

  test("removing the read-token file revokes every read token without a restart; a file broken or sharing a token at reload revokes them too", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const lines: string[] = [];
    const gate = mustGate({ tokenFile, readTokenFile: writeTokens(tree.root, [READER], "read-token"), log: createLogger("json", (l) => lines.push(l)) });
    await using a = appBehind(tree, gate);
    const reader = async () => (await a.app.request(`/train/${JOB}`, { headers: bearer(READER) })).status;
    expect(await reader()).toBe(404);
    rmSync(join(tree.root, "read-token"));
    await waitFor(async () => (await reader()) === 401, "the removed file's tokens to be refused");
    expect(JSON.parse(lines.at(-1)!).msg).toBe("auth tokens revoked: the file was removed; none of its tokens is valid until it is fixed");
    writeTokens(tree.root, [READER], "read-token");
    await waitFor(async () => (await reader()) === 404, "the file written again to be read");
    writeTokens(tree.root, [READER, TOKEN_A], "read-token");
    await waitFor(async () => (await reader()) === 401, "a read-token file sharing a token to revoke the readers");
    expect(JSON.parse(lines.at(-1)!).msg).toBe("auth tokens revoked: the file changed and was refused; none of its tokens is valid until it is fixed");
    // The acting token is untouched: it still acts, and is never let through as a reader.
    expect((await a.app.request(`/train/${JOB}`, { headers: bearer(TOKEN_A) })).status).toBe(404);
    writeTokens(tree.root, ["short"], "read-token");
    writeTokens(tree.root, [READER], "read-token");
    await waitFor(async () => (await reader()) === 404, "a fixed file to be read again");
  });

  test("contrast: removing the token file keeps its tokens valid, as a mistaken edit does", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const lines: string[] = [];
    await using a = appBehind(tree, mustGate({ tokenFile, log: createLogger("json", (l) => lines.push(l)) }));
    rmSync(tokenFile);
    await waitFor(async () => ((await a.app.request(`/train/${JOB}`, { headers: bearer(TOKEN_A) })).status, lines.length === 1), "the removal to be noticed");
    expect((await a.app.request(`/train/${JOB}`, { headers: bearer(TOKEN_A) })).status).toBe(404);
  });
});

describe("where the tokens come from", () => {
  test("systemd's credential wins over auth.token_file when both exist", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const credentials = join(tree.root, "credentials");
    writeTokens(credentials, [TOKEN_B]);
    const gate = mustGate({ tokenFile, credentialsDirectory: credentials });
    expect(gate.source).toEqual({ kind: "systemd-credential", path: join(credentials, "token") });
    expect([gate.tokens!.matches(TOKEN_B), gate.tokens!.matches(TOKEN_A)]).toEqual([true, false]);
  });

  test("with $CREDENTIALS_DIRECTORY set but no token credential in it, auth.token_file is used", () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, [TOKEN_A]);
    const gate = mustGate({ tokenFile, credentialsDirectory: join(tree.root, "no-credentials") });
    expect(gate.source).toEqual({ kind: "token-file", path: tokenFile });
    expect(gate.tokens!.matches(TOKEN_A)).toBe(true);
  });

  test("a short token or one with a space refuses setup, naming the line but never its content", () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, ["# ok", TOKEN_A, "short-secret", `${TOKEN_B} trailing-words`]);
    const setup = gateFor({ tokenFile, listen: "0.0.0.0:8203" });
    expect(setup).toEqual({
      ok: false,
      error: [
        `${tokenFile} line 3: a token must be at least 16 characters`,
        `${tokenFile} line 4: a token may hold only A-Z a-z 0-9 . _ ~ + / - (and trailing =), with no spaces`,
      ],
    });
    expect(JSON.stringify(setup)).not.toContain("short-secret");
  });

  test("a token file holding only comments refuses setup even on loopback: it is there, so a token was meant", () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(tree.root, ["# nothing yet", ""]);
    expect(gateFor({ tokenFile })).toEqual({ ok: false, error: [`${tokenFile} holds no token (only blank lines or comments)`] });
  });

  test("a token path that cannot be read (here a directory) refuses setup instead of running open", () => {
    using tree = makeHostTree();
    const tokenFile = join(tree.root, "token.d");
    mkdirSync(tokenFile);
    expect(gateFor({ tokenFile })).toEqual({ ok: false, error: [`cannot read ${tokenFile} (EISDIR)`] });
  });
});

describe("when the worker may run without a token", () => {
  test("a non-loopback listen without a token refuses, saying how to create one", () => {
    using tree = makeHostTree();
    const tokenFile = join(tree.root, "etc", "token");
    const setup = gateFor({ tokenFile, listen: "0.0.0.0:8203" });
    if (setup.ok) throw new Error("expected a refusal");
    expect(setup.error.join("\n")).toContain(`umask 077; openssl rand -hex 32 > ${tokenFile}`);
    expect(setup.error.join("\n")).toContain('auth.mode = "none"');
  });

  test("a loopback listen without a token runs open and says so; with a token file it requires the token", () => {
    using tree = makeHostTree();
    const missing = join(tree.root, "etc", "token");
    expect(mustGate({ tokenFile: missing, listen: "127.0.0.1:8203" })).toMatchObject({ mode: "none-loopback", tokens: null });
    expect(mustGate({ tokenFile: writeTokens(tree.root, [TOKEN_A]), listen: "127.0.0.1:8203" })).toMatchObject({ mode: "token" });
  });

  test('auth.mode "none" runs open on any address, and /healthz says none', async () => {
    using tree = makeHostTree();
    const gate = mustGate({ tokenFile: writeTokens(tree.root, [TOKEN_A]), listen: "0.0.0.0:8203", mode: "none" });
    expect(gate).toMatchObject({ mode: "none", tokens: null });
    await using a = appBehind(tree, gate);
    expect((await a.app.request(`/train/${JOB}`)).status).toBe(404);
    expect(await (await a.app.request("/healthz")).json()).toMatchObject({ auth_mode: "none" });
  });

  test("only loopback binds count as loopback", () => {
    const binds = ["127.0.0.1:8203", "127.8.9.10:1", "[::1]:8203", "localhost:8203", "[::ffff:127.0.0.1]:80", "0.0.0.0:8203", "[::]:8203", "192.168.1.5:8203", "host.docker.internal:8203", "128.0.0.1:1"];
    expect(binds.map((b) => [b, isLoopbackListen(b)])).toEqual([
      ["127.0.0.1:8203", true], ["127.8.9.10:1", true], ["[::1]:8203", true], ["localhost:8203", true], ["[::ffff:127.0.0.1]:80", true],
      ["0.0.0.0:8203", false], ["[::]:8203", false], ["192.168.1.5:8203", false], ["host.docker.internal:8203", false], ["128.0.0.1:1", false],
    ]);
  });

  test("the token file is looked at no more than once a TOKEN_CHECK_MS, and then a change takes effect", () => {
    using tree = makeHostTree();
    const path = writeTokens(tree.root, [TOKEN_A]);
    let t = 0;
    const tokens = reloadingTokens({ kind: "token-file", path }, [TOKEN_A], createLogger("json", () => {}), undefined, () => t);
    writeTokens(tree.root, [TOKEN_B]);
    t = TOKEN_CHECK_MS - 1;
    // Contrast: within the interval the old token still passes, the file unread.
    expect([tokens.matches(TOKEN_A), tokens.matches(TOKEN_B)]).toEqual([true, false]);
    t = TOKEN_CHECK_MS;
    expect([tokens.matches(TOKEN_A), tokens.matches(TOKEN_B)]).toEqual([false, true]);
  });
});
