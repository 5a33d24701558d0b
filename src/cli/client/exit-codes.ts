// What a script may rely on; `--help` of every client command and the README list the same numbers.
export const EXIT = {
  ok: 0,
  jobFailed: 1,
  usage: 2,
  jobCancelled: 3,
  unreachable: 4,
  refused: 5,
  noSuchJob: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES_HELP = `Exit codes:
  0  succeeded (or the command did what it was asked)
  1  the job failed
  2  usage error (bad option, unreadable file, unusable --config)
  3  the job was cancelled
  4  cannot reach the worker (connection refused, timed out, dropped)
  5  the worker refused the request (4xx other than 404, or 5xx); its detail is printed
  6  no such job (404)
`;
