/** `1 image`, `2 images`: a count with its noun as the count wants it. */
export function counted(n: number, noun: string): string {
  return `${n} ${n === 1 ? noun : `${noun}s`}`;
}
