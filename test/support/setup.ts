import { setDefaultTimeout } from "bun:test";

// Most tests start real processes; on a loaded 2-core machine 5 s is too tight a bound for them.
// Tests wait on conditions, never on the clock, so this bound is only a backstop against a hang.
// Bun 1.4.5 applies a preload's default to the first test file it runs only (a second file's 6 s test times out
// at 5 s): a file whose tests can take longer than 5 s sets its own as well.
setDefaultTimeout(30_000);
