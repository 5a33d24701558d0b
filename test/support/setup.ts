import { setDefaultTimeout } from "bun:test";

// Most tests start real processes; on a loaded 2-core machine 5 s is too tight a bound for them.
// Tests wait on conditions, never on the clock, so this bound is only a backstop against a hang.
// Under `bun test --parallel` (package.json's test scripts) each file runs isolated and gets this default.
// A plain `bun test` of several files in one process applies it to the first file only (Bun 1.4.5: a second file's
// 6 s test times out at 5 s), so a file whose tests can take longer than 5 s sets its own as well.
setDefaultTimeout(30_000);
