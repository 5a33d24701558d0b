// Runs the simulated trainer as its own process, as the worker does: `bun simulate-entry.ts launch ...`.
import { runSimulatedLaunch } from "../../src/simulator/simulate.ts";

process.exit(await runSimulatedLaunch(process.argv.slice(3), process.env));
