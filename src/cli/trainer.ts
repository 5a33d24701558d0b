import { bundle } from "../trainer/bundle.ts";
import { install } from "../trainer/install.ts";
import { didYouMean } from "../suggest.ts";
import { parseArgs, UsageError } from "./args.ts";
import { trainerCheckCommand } from "./doctor.ts";
import { printable } from "../printable.ts";

const EXIT_PROBLEM = 1;

// `lora-worker trainer bundle|install|check`: the trainer's environment made on a machine with PyPI, installed on
// one without, and checked where the config points.
// `actions`: the words the command table gives its forms, for a mistyped one's guess.
export async function trainerCommand(argv: string[], actions: readonly string[]): Promise<number> {
  const [action, ...rest] = argv;
  if (action === "check") return trainerCheckCommand(rest);
  if (action === "bundle") return bundleCommand(rest);
  if (action === "install") return installCommand(rest);
  const got = action === undefined ? "" : `, got ${action}${didYouMean(action, actions)}`;
  throw new UsageError(`trainer takes \`bundle\`, \`install\` or \`check\`${got}`);
}

const say = (line: string) => process.stdout.write(`${line}\n`);

async function bundleCommand(argv: string[]): Promise<number> {
  const { positional, values, flags } = parseArgs(argv, {
    values: ["sd-scripts", "out", "python", "python-version", "platform"],
    flags: ["other-sd-scripts"],
  });
  if (positional.length > 0) throw new UsageError(`trainer bundle takes no arguments, got ${positional.join(" ")}`);
  if (values["sd-scripts"] === undefined || values.out === undefined) {
    throw new UsageError("trainer bundle needs --sd-scripts DIR and --out FILE");
  }
  const result = await bundle({
    sdScripts: values["sd-scripts"],
    out: values.out,
    python: values.python ?? "python3",
    pythonVersion: values["python-version"],
    platform: values.platform,
    otherSdScripts: flags.has("other-sd-scripts"),
    env: process.env,
    say,
  });
  if (!result.ok) {
    process.stderr.write(printable(`trainer bundle: nothing written: ${result.error}\n`));
    return EXIT_PROBLEM;
  }
  say(`bundle written: ${result.value}`);
  return 0;
}

async function installCommand(argv: string[]): Promise<number> {
  const { positional, values } = parseArgs(argv, { values: ["venv", "python"] });
  if (positional.length !== 1) throw new UsageError("trainer install takes one bundle FILE");
  const result = await install({ archive: positional[0]!, venv: values.venv, python: values.python ?? "python3", say })
    .catch((err: Error) => ({ ok: false as const, error: err.message }));
  if (!result.ok) {
    process.stderr.write(printable(`trainer install: nothing installed: ${result.error}\n`));
    return EXIT_PROBLEM;
  }
  say(`the config's lines for it:\n${result.value}`);
  return 0;
}
