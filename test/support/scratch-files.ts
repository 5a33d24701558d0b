import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

export function writeExecutable(path: string, text: string): string {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
  return path;
}

/** Every entry under dir with its type, mode, owner, mtime and content hash: equal fingerprints, untouched trees. */
export function treeFingerprint(dir: string): string[] {
  const lines: string[] = [];
  const walk = (path: string, rel: string) => {
    const st = lstatSync(path);
    const content = st.isFile() ? new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex") : "";
    lines.push(`${rel} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.mtimeMs} ${content}`);
    if (st.isDirectory()) for (const name of readdirSync(path).sort()) walk(join(path, name), `${rel}/${name}`);
  };
  walk(dir, ".");
  return lines;
}

/** A character device node (the same one as /dev/null) standing in for /dev/nvidia-uvm; needs root. */
export function makeDeviceNode(path: string): string {
  mkdirSync(dirname(path), { recursive: true });
  const res = Bun.spawnSync(["mknod", "-m", "0666", path, "c", "1", "3"], { stderr: "pipe" });
  if (res.exitCode !== 0) throw new Error(`mknod ${path} failed: ${res.stderr.toString()}`);
  return path;
}

/** A port that was free a moment ago, for configs that must name their port before the worker binds it. */
export function freePort(): number {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}
