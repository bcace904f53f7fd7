/**
 * Sandbox ids on the command line (DESIGN.md §5): the id is used as given first; only when the
 * server answers "sandbox … not found" it is resolved as a prefix (with or without `sb-`) through
 * `GET /api/v1/sandboxes?id_prefix=P&limit=2`: one match is used, none keeps the not-found error,
 * two are ambiguous and listed (a usage error: exit 2; `sbx exec` maps it to 125).
 */
import { SbxError } from '../../../contracts/errors.js';
import type { CliContext } from '../context.js';
import { UsageError } from '../errors.js';

/** What resolving an id needs of a command's context. */
type IdContext = Pick<CliContext, 'client' | 'signal'>;

/** Ambiguous prefix: a usage error that names the candidates. */
export class AmbiguousIdError extends UsageError {
  constructor(
    readonly prefix: string,
    readonly candidates: string[],
  ) {
    super(`sandbox id prefix "${prefix}" matches more than one sandbox (${candidates.join(', ')}, …): give more characters of the id`);
  }
}

/** True when `err` is the server's "sandbox ID not found" for this id (not a missing file, template…). */
export function isSandboxNotFound(err: unknown, id: string): boolean {
  return (
    err instanceof SbxError &&
    err.code === 'not_found' &&
    (err.message === `sandbox ${id} not found` || /^sandbox \S+ not found$/.test(err.message))
  );
}

/** Rejects things that cannot be a sandbox id (`ID:/path` belongs to `sbx files`). */
export function checkSandboxId(id: string): void {
  if (id === '') throw new UsageError('the sandbox id is empty');
  if (id.includes(':') || id.includes('/')) {
    throw new UsageError(
      `"${id}" is not a sandbox id (the ID:/path form is for sbx files; give the id alone, e.g. sb-1a2b3c or a unique prefix of it)`,
    );
  }
}

/**
 * The one visible live sandbox whose id starts with `prefix` (tried with `sb-` in front first when it
 * lacks it); undefined when none does; AmbiguousIdError when several do.
 */
export async function resolveIdPrefix(ctx: IdContext, prefix: string): Promise<string | undefined> {
  const tries = prefix.startsWith('sb-') ? [prefix] : [`sb-${prefix}`, prefix];
  for (const p of tries) {
    const found = await ctx.client.list({ id_prefix: p, limit: 2, signal: ctx.signal });
    // An older server ignores id_prefix and answers every sandbox: filter here as well.
    const matches = found.filter((s) => s.id.startsWith(p)).map((s) => s.id);
    if (matches.length === 1) return matches[0];
    if (matches.length > 1) throw new AmbiguousIdError(prefix, matches.slice(0, 2));
  }
  return undefined;
}

/**
 * Runs `op` with the id as given; when it answers "sandbox not found", resolves the id as a prefix
 * and runs `op` again with the full id. Returns the result and the id that was used.
 */
export async function withSandboxId<T>(ctx: IdContext, id: string, op: (id: string) => Promise<T>): Promise<{ id: string; value: T }> {
  checkSandboxId(id);
  try {
    return { id, value: await op(id) };
  } catch (err) {
    if (!isSandboxNotFound(err, id)) throw err;
    const full = await resolveIdPrefix(ctx, id);
    if (full === undefined || full === id) throw err;
    return { id: full, value: await op(full) };
  }
}

/** The full id for `id`: a GET as given, then the prefix lookup (for commands that need the id before acting). */
export async function resolveSandboxId(ctx: CliContext, id: string): Promise<string> {
  return (await withSandboxId(ctx, id, (x) => ctx.client.get(x, { signal: ctx.signal }))).id;
}

/**
 * A sandbox named on the command line for several requests: the first request resolves the id
 * (withSandboxId), later ones use the full id.
 */
export function sandboxRef(ctx: CliContext, given: string) {
  let id = given;
  let resolved = false;
  return {
    get id(): string {
      return id;
    },
    async call<T>(op: (id: string) => Promise<T>): Promise<T> {
      if (resolved) return op(id);
      const r = await withSandboxId(ctx, id, op);
      id = r.id;
      resolved = true;
      return r.value;
    },
  };
}
