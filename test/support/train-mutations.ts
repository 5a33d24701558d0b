// Mutations of a valid train request that each make it invalid whatever else is mutated, so a fuzz run
// can demand "never a spawn": a wrong type, a value out of range, a forbidden character, a dropped or
// unknown field, or a break in the JSON text itself. Nothing here can turn an invalid body valid again.
export type Rng = () => number;

// mulberry32: small, seedable, good enough to spread mutations.
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;

const STRING_FIELDS = ["dataset_dir", "base_model_path", "output_dir", "output_name", "trigger", "subject_class", "tier"] as const;
const INT_FIELDS = ["repeats", "device_index", "seed"] as const;
const FIELDS = [...STRING_FIELDS, ...INT_FIELDS];
// Each is outside every string field's allowed alphabet (paths, names, the tier enum).
const FORBIDDEN = ["\u0000", "\n", "\u001b", "\u202e", "\u200b", "\ufeff", "\uff0e", "\ud800", "%", '"', "[", "]", "\\", "$", ";", "`", "'", "*", "é"];
const NOT_A_STRING = [null, true, false, 0, -1, 1.5, [], {}, ["x"], { a: 1 }];
const NOT_AN_INT = [null, true, "1", "", 1.5, -0.5, [], [1], {}, { v: 1 }];
const OUT_OF_RANGE: Record<(typeof INT_FIELDS)[number], number[]> = {
  repeats: [0, -1, 101, 1000, 2 ** 53 + 2],
  device_index: [-1, 7, 64, 2 ** 31, 2 ** 53 + 2],
  seed: [-1, 2 ** 32, 2 ** 40, 2 ** 53 + 2],
};

type Body = Record<string, unknown>;
type ValueMutation = (body: Body, rng: Rng) => void;

const valueMutations: ValueMutation[] = [
  (b, rng) => void delete b[pick(rng, FIELDS)],
  (b, rng) => (b[`x_${Math.floor(rng() * 1e6)}`] = pick(rng, ["--network_module=evil", 1, null, [], {}])),
  (b, rng) => (b[pick(rng, STRING_FIELDS)] = pick(rng, NOT_A_STRING)),
  (b, rng) => (b[pick(rng, INT_FIELDS)] = pick(rng, NOT_AN_INT)),
  (b, rng) => {
    const field = pick(rng, INT_FIELDS);
    b[field] = pick(rng, OUT_OF_RANGE[field]);
  },
  (b, rng) => {
    const field = pick(rng, STRING_FIELDS);
    const value = typeof b[field] === "string" ? (b[field] as string) : "x";
    const at = Math.floor(rng() * (value.length + 1));
    b[field] = value.slice(0, at) + pick(rng, FORBIDDEN) + value.slice(at);
  },
  (b, rng) => {
    const field = pick(rng, ["dataset_dir", "output_dir", "base_model_path"] as const);
    b[field] = `${String(b[field])}${pick(rng, ["/..", "/../..", "/.", "//x", "/-rf"])}`;
  },
];

type TextMutation = (text: string, rng: Rng) => string;

const textMutations: TextMutation[] = [
  (t, rng) => t.slice(0, Math.floor(rng() * (t.length - 1))), // never whole: always malformed
  (t, rng) => `${t.slice(0, -1)},"${pick(rng, FIELDS)}":${JSON.stringify(pick(rng, ["x", 1]))}}`, // a duplicate key
  (t) => `[${t}]`,
  (t) => t.replace(/"repeats":(\d+)/, '"repeats":$1.0'),
  (t, rng) => `${t}${pick(rng, ["x", "}", ",", " 1"])}`,
];

export interface Mutated {
  text: string;
  mutations: string[];
}

// One to three value mutations, then sometimes one of the text.
export function mutate(valid: Body, rng: Rng): Mutated {
  const body = structuredClone(valid);
  const mutations: string[] = [];
  const rounds = 1 + Math.floor(rng() * 3);
  for (let i = 0; i < rounds; i++) {
    const m = Math.floor(rng() * valueMutations.length);
    valueMutations[m]!(body, rng);
    mutations.push(`value#${m}`);
  }
  let text = JSON.stringify(body);
  if (rng() < 0.3) {
    const m = Math.floor(rng() * textMutations.length);
    text = textMutations[m]!(text, rng);
    mutations.push(`text#${m}`);
  }
  return { text, mutations };
}
