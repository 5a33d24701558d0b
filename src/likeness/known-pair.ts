import photoA from "./known-pair/obama-a.jpg" with { type: "file" };
import photoB from "./known-pair/obama-b.jpg" with { type: "file" };

/** Two real photos of one person (known-pair/SOURCES.md), built into the binary: doctor's likeness check scores
 * them, and a smoke run's dataset holds them, so its upload check and previews meet a real face. */
export const KNOWN_PAIR: readonly string[] = [photoA, photoB];
