// "Did you mean": the candidate a mistyped word most likely meant, for the CLI's commands and the config's keys.

// Edits to turn `a` into `b`: a letter added, dropped or changed, or two neighbours swapped (the commonest typo).
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i]!;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j]!, rows[i - 2]![j - 2]! + 1);
      }
    }
  }
  return rows[a.length]![b.length]!;
}

/** The nearest candidate, when it is near enough to be a typo of `word` (a third of its letters, at least one). */
export function closest(word: string, candidates: Iterable<string>): string | null {
  const bound = Math.max(1, Math.floor(word.length / 3));
  let best: { candidate: string; d: number } | null = null;
  for (const candidate of candidates) {
    const d = distance(word.toLowerCase(), candidate.toLowerCase());
    if (d <= bound && (best === null || d < best.d)) best = { candidate, d };
  }
  return best?.candidate ?? null;
}

/** ` (did you mean X?)`, or nothing when no candidate is near. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const guess = closest(word, candidates);
  return guess === null ? "" : ` (did you mean ${guess}?)`;
}
