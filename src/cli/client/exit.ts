// What a script may rely on; `--help` of every client command and the README list the same numbers.
export const EXIT = {
  ok: 0,
  jobFailed: 1,
  usage: 2,
  jobCancelled: 3,
  unreachable: 4,
  refused: 5,
  noSuchJob: 6,
  jobPaused: 7,
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
  7  the job was paused at a saved state (lora-worker resume ID continues it)
`;

type ClientErrorKind = "unreachable" | "refused" | "no_such_job";

const EXIT_OF: Record<ClientErrorKind, ExitCode> = {
  unreachable: EXIT.unreachable,
  refused: EXIT.refused,
  no_such_job: EXIT.noSuchJob,
};

// The one error a client command ends with; the entry point prints it and exits with its code.
export class ClientError extends Error {
  constructor(
    readonly kind: ClientErrorKind,
    message: string,
  ) {
    super(message);
  }

  get exitCode(): ExitCode {
    return EXIT_OF[this.kind];
  }
}
