/** Exit codes of `sbx` (DESIGN.md §5). Anything else from `sbx exec` is the remote command's code. */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  config: 3,
  notFound: 4,
  rejected: 5,
  unavailable: 6,
  execTimeout: 124,
  execFailed: 125,
} as const;

/** Rows for help and the man page. */
export const EXIT_STATUS_DOC: ReadonlyArray<readonly [number | string, string]> = [
  [0, 'success'],
  [1, 'failure (server rejected the request, a check failed, a local file is missing)'],
  [2, 'usage error: unknown command or option, bad option value, ambiguous sandbox id prefix'],
  [3, 'configuration error'],
  [4, 'not found: sandbox, template, provider, owner quota or file'],
  [5, 'rejected by quota or admission (resource_limit)'],
  [6, 'server unreachable or unavailable'],
  [124, 'sbx exec: the command hit its timeout'],
  [125, 'sbx exec: sbx itself failed (unknown or ambiguous sandbox, server unreachable, bad usage, a failure while the command ran)'],
  ['other', 'sbx exec: the exit code of the command in the sandbox'],
];
