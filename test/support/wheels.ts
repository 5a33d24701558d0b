import { join } from "node:path";

/** A package to write as a wheel: a module of one `main` that prints `says`, and what it needs. */
export interface TinyPackage {
  name: string;
  version: string;
  /** A console script named so, running the module's main (as accelerate's is). */
  script?: string;
  says?: string;
  requires?: string[];
  /** A `.pth` file at the wheel's top: Python runs its `import` lines at every start of the venv. */
  pth?: string;
}

// A pure-Python wheel as pip reads one (PEP 427: the module, METADATA, WHEEL, entry_points.txt, RECORD), zipped by
// the system's python3: no build backend and no index are needed to make it.
const WRITER = `import base64, hashlib, json, sys, zipfile
spec, out = json.loads(sys.argv[1]), sys.argv[2]
name, version = spec["name"], spec["version"]
info = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"def main():\\n    print({spec.get('says', name)!r})\\n",
    f"{info}/METADATA": "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (name, version)
        + "".join(f"Requires-Dist: {r}\\n" for r in spec.get("requires", [])),
    f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: lora-worker-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
if spec.get("pth"):
    files[f"{name}-init.pth"] = spec["pth"] + "\\n"
if spec.get("script"):
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\\n{spec['script']} = {name}:main\\n"
def record(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=").decode()
    return f"sha256={digest},{len(data.encode())}"
files[f"{info}/RECORD"] = "".join(f"{path},{record(data)}\\n" for path, data in files.items()) + f"{info}/RECORD,,\\n"
with zipfile.ZipFile(out, "w") as wheel:
    for path, data in files.items():
        wheel.writestr(path, data)
`;

/** Writes `pkg` as `<dir>/<name>-<version>-py3-none-any.whl` and returns its path. */
export function writeWheel(dir: string, pkg: TinyPackage): string {
  const path = join(dir, `${pkg.name}-${pkg.version}-py3-none-any.whl`);
  const res = Bun.spawnSync(["python3", "-c", WRITER, JSON.stringify(pkg), path]);
  if (res.exitCode !== 0) throw new Error(`writing ${path}: ${res.stderr.toString()}`);
  return path;
}
