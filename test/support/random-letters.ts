/** Letters from a fixed linear congruential sequence: the same run to run, with no period a BPE would merge. */
export function randomLetters(n: number): string {
  let seed = 41;
  return Array.from({ length: n }, () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return "abcdefghijklmnopqrstuvwxyz"[Math.floor((seed / 2 ** 31) * 26)];
  }).join("");
}
