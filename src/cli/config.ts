import { configTemplate } from "../config/keys.ts";
import { didYouMean } from "../suggest.ts";
import { UsageError } from "./args.ts";

// `lora-worker config template`: every key commented out at its default, under its meaning; what install.sh
// writes as a new host's config.
export function configCommand(argv: string[]): number {
  if (argv.length !== 1 || argv[0] !== "template") {
    const got = argv.length === 0 ? "" : `, got ${argv.join(" ")}${didYouMean(argv[0]!, ["template"])}`;
    throw new UsageError(`config takes \`template\`${got}`);
  }
  process.stdout.write(configTemplate());
  return 0;
}
