import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HostTree } from "./host-tree.ts";
import { writeExecutable } from "./scratch-files.ts";

// A trainer that prints each file <feed>/N as it appears, in order, and exits 0 once <feed>/end appears: a test
// says exactly what it prints, and when.
export function fedTrainer(tree: HostTree) {
  const feed = join(tree.root, "feed");
  mkdirSync(feed);
  const trainer = writeExecutable(join(tree.root, "fed-trainer.sh"), `#!/bin/sh
n=0
while :; do
  if [ -e '${feed}'/$n ]; then cat '${feed}'/$n; n=$((n+1))
  elif [ -e '${feed}/end' ]; then exit 0
  else sleep 0.01; fi
done
`);
  let fed = 0;
  return {
    trainer,
    // Whole, by a rename, so the trainer never prints half a file.
    feed(text: string) {
      writeFileSync(join(feed, "next"), text);
      renameSync(join(feed, "next"), join(feed, String(fed++)));
    },
    end: () => writeFileSync(join(feed, "end"), ""),
    fed: () => fed,
  };
}
