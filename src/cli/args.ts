export interface ParsedArgs {
  positional: string[];
  options: Record<string, string>;
}

export class UsageError extends Error {}

// `--name value` or `--name=value`, only for the options a command declares.
export function parseArgs(argv: string[], known: readonly string[]): ParsedArgs {
  const positional: string[] = [];
  const options: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (!known.includes(name)) throw new UsageError(`unknown option --${name}`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    options[name] = value;
  }
  return { positional, options };
}
