import type Docker from 'dockerode';
import { badRequest, conflict, isAbortError, SbxError } from '../../../core/errors.js';
import type { SnapshotResult } from '../../../core/ports/index.js';
import { LABEL_INSTALLATION } from './containers.js';
import { FILTERED_ENV_VARS } from './egress.js';
import { bounded, call, isNotFound, toSbxError } from './errors.js';

/** Label naming the snapshot an image holds. */
export const LABEL_SNAPSHOT = 'sbx.snapshot';
/** Label of an image committed for a fork (DESIGN.md §16): reachable only by that fork, like a snapshot's. */
export const LABEL_FORK = 'sbx.fork';
/** The snapshot and fork namespaces, also spelled with Docker Hub's own registry names. */
const SNAPSHOT_REPO = /^(?:(?:docker\.io|index\.docker\.io|registry-1\.docker\.io)\/)?sbx-(?:snapshot|fork)\//;

/**
 * Snapshot and fork images are reached only through `snapshot` (DESIGN.md §10), whose ownership
 * check is the sandbox's. The one rule for every other way an image comes in — a spawn's or a
 * template's `image`, a warm shape — by name, tag, id prefix or digest: a name in the
 * `sbx-snapshot/` namespace, or an image labelled as a snapshot or fork image (this installation's
 * or another's on the same engine), is refused with 400. `labels` null: only the name is judged
 * (before the image is looked up, so such a name is never pulled either).
 */
export function refuseSnapshotImage(ref: string, labels: Record<string, string> | null): void {
  const byLabel = labels !== null && (LABEL_SNAPSHOT in labels || LABEL_FORK in labels);
  if (!byLabel && !SNAPSHOT_REPO.test(ref.toLowerCase())) return;
  const shown = ref.length > 100 ? `${JSON.stringify(ref.slice(0, 100))}…` : JSON.stringify(ref);
  throw badRequest(`image ${shown} is a snapshot image: start from a snapshot with "snapshot": "<name>" instead of "image"`);
}
/** Committing a large container takes a while. */
const COMMIT_TIMEOUT_MS = 10 * 60_000;

/** The image a snapshot is committed to (DESIGN.md §10). */
export function snapshotImage(name: string): string {
  return `sbx-snapshot/${name}:latest`;
}

/** The image a fork's copy is committed to (DESIGN.md §16). */
export function forkImage(name: string): string {
  return `sbx-fork/${name}:latest`;
}

/** Snapshot images, or the fork images that are kept like them: repository, label, the words errors use. */
const KINDS = {
  snapshot: { repo: 'sbx-snapshot', label: LABEL_SNAPSHOT, image: snapshotImage },
  fork: { repo: 'sbx-fork', label: LABEL_FORK, image: forkImage },
} as const;

/**
 * Snapshots as images (DESIGN.md §10): `docker commit` of the sandbox's container to
 * `sbx-snapshot/<name>:latest`, labelled with this installation's id and the snapshot's name.
 * Volumes mounted into the container are not part of the image (they are the volume's). Kind
 * `fork`: a fork's copy (DESIGN.md §16), `sbx-fork/<name>:latest` labelled `sbx.fork`, kept and
 * refused as an `image` the same way; the commit pauses the container (the engine's pause) while it
 * copies, so the copy is of one moment.
 */
export class DockerSnapshots {
  private readonly kind: (typeof KINDS)[keyof typeof KINDS];

  constructor(
    private readonly docker: Docker,
    private readonly installationId: string,
    private readonly what: keyof typeof KINDS = 'snapshot',
  ) {
    this.kind = KINDS[what];
  }

  async create(runtimeId: string, name: string, signal?: AbortSignal): Promise<SnapshotResult> {
    const { what, kind } = this;
    const ref = kind.image(name);
    // The tag is this name's: an image already there (another installation's, or left over) is not overwritten.
    if (await this.labels(ref, signal)) throw conflict(`${what} "${name}" already exists on the docker engine (image ${ref})`);
    const env = await this.imageEnv(runtimeId, signal);
    try {
      await this.docker.getContainer(runtimeId).commit({
        // Query and body apart (docker-modem): the body is the image config merged over the container's.
        _query: { container: runtimeId, repo: `${kind.repo}/${name}`, tag: 'latest', pause: true, comment: `sbx ${what} ${name}` },
        // The other kind's label emptied: a snapshot of a fork (or a fork of a sandbox from a snapshot) is listed as one kind only.
        _body: {
          ...(env.length > 0 ? { Env: env } : {}),
          Labels: {
            [LABEL_INSTALLATION]: this.installationId,
            [KINDS[what === 'fork' ? 'snapshot' : 'fork'].label]: '',
            [kind.label]: name,
          },
        },
        abortSignal: bounded(signal, COMMIT_TIMEOUT_MS),
      } as never);
    } catch (err) {
      if (signal?.aborted && isAbortError(err)) throw err;
      if (isNotFound(err)) throw new SbxError('not_found', `${what}: the sandbox runtime is gone`);
      throw toSbxError(err, `${what} ${name}`);
    }
    const info = await call(
      `${what} ${name}`,
      (s) => this.docker.getImage(ref).inspect({ abortSignal: s } as Docker.ImageInspectOptions),
      signal,
    );
    return { image: ref, size_bytes: Number(info.Size ?? 0), kernel: null };
  }

  /**
   * The variables a filtered sandbox got from sbx (proxy, CA bundle: DESIGN.md §15 — the bundle is
   * mounted, never in the image) as the committed image must hold them: the value its own image
   * had, else the bare name, which the engine keeps out of every process's environment (a commit
   * merges the container's variables into the image, so leaving one out would keep sbx's value).
   * Empty for a container that has none of them.
   */
  private async imageEnv(runtimeId: string, signal?: AbortSignal): Promise<string[]> {
    const what = `${this.what} of ${runtimeId}`;
    const c = await call(
      what,
      (s) => this.docker.getContainer(runtimeId).inspect({ abortSignal: s } as Docker.ContainerInspectOptions),
      signal,
    );
    const keyOf = (e: string) => (e.includes('=') ? e.slice(0, e.indexOf('=')) : e);
    const set = new Set((c.Config?.Env ?? []).map(keyOf).filter((k: string) => FILTERED_ENV_VARS.includes(k)));
    if (set.size === 0) return [];
    const image = await call(what, (s) => this.docker.getImage(c.Image).inspect({ abortSignal: s } as Docker.ImageInspectOptions), signal);
    const own = new Map((image.Config?.Env ?? []).filter((e: string) => e.includes('=')).map((e: string) => [keyOf(e), e] as const));
    return [...set].map((k) => own.get(k) ?? k);
  }

  /**
   * Removes the image when it is this installation's (forced: containers started from it keep
   * their layers until they go). Gone already: fine.
   */
  async remove(name: string, signal?: AbortSignal): Promise<void> {
    const ref = this.kind.image(name);
    const labels = await this.labels(ref, signal);
    if (!labels || labels[LABEL_INSTALLATION] !== this.installationId) return;
    try {
      await this.docker.getImage(ref).remove({ force: true, abortSignal: bounded(signal) } as unknown as Docker.ImageRemoveOptions);
    } catch (err) {
      if (isNotFound(err)) return;
      if (signal?.aborted && isAbortError(err)) throw err;
      throw toSbxError(err, `delete ${this.what} ${name}`);
    }
  }

  /** This installation's snapshot (or fork) images (by their sbx name), with when each was made. */
  async list(signal?: AbortSignal): Promise<Array<{ name: string; image: string; created_at: string | null }>> {
    const { kind } = this;
    const images = (await call(
      `list ${this.what} images`,
      (s) =>
        this.docker.listImages({
          filters: { label: [`${LABEL_INSTALLATION}=${this.installationId}`, kind.label] },
          abortSignal: s,
        } as never) as unknown as Promise<unknown>,
      signal,
    )) as Array<{ Labels?: Record<string, string> | null; Created?: number }>;
    return images.flatMap((i) => {
      const name = (i.Labels ?? {})[kind.label];
      return name ? [{ name, image: kind.image(name), created_at: i.Created ? new Date(i.Created * 1000).toISOString() : null }] : [];
    });
  }

  /** Before a spawn from snapshot (or fork image) `name`: its image must be here, this installation's image of it (never pulled). */
  async require(name: string, image: string, signal?: AbortSignal): Promise<void> {
    const labels = image === this.kind.image(name) ? await this.labels(image, signal) : null;
    if (!labels || labels[this.kind.label] !== name || labels[LABEL_INSTALLATION] !== this.installationId)
      throw new SbxError('provider_error', `${this.what} ${name}: its image is missing on the docker engine`);
  }

  /** The image's labels, or null when there is no such image. */
  private async labels(ref: string, signal?: AbortSignal): Promise<Record<string, string> | null> {
    try {
      const info = await this.docker.getImage(ref).inspect({ abortSignal: bounded(signal) } as Docker.ImageInspectOptions);
      return info.Config?.Labels ?? {};
    } catch (err) {
      if (isNotFound(err)) return null;
      if (signal?.aborted && isAbortError(err)) throw err;
      throw toSbxError(err, `image ${ref}`);
    }
  }
}
