import { setDefaultTimeout } from "bun:test";

// Most tests start real processes; on a loaded 2-core machine 5 s is too tight a bound for them.
// Tests wait on conditions, never on the clock, so this bound is only a backstop against a hang.
setDefaultTimeout(30_000);
