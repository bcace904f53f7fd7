import type Docker from 'dockerode';
import { badRequest, conflict, isAbortError, SbxError } from '../../../core/errors.js';
import type { SnapshotResult } from '../../../core/ports.js';
import { LABEL_INSTALLATION } from './containers.js';
import { bounded, call, isNotFound, toSbxError } from './errors.js';

/** Label naming the snapshot an image holds. */
export const LABEL_SNAPSHOT = 'sbx.snapshot';
/** Label of an image committed for a fork (DESIGN.md §16): reachable only by that fork, like a snapshot's. */
export const LABEL_FORK = 'sbx.fork';
/** The snapshot namespace, also spelled with Docker Hub's own registry names. */
const SNAPSHOT_REPO = /^(?:(?:docker\.io|index\.docker\.io|registry-1\.docker\.io)\/)?sbx-snapshot\//;

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

/**
 * Snapshots as images (DESIGN.md §10): `docker commit` of the sandbox's container to
 * `sbx-snapshot/<name>:latest`, labelled with this installation's id and the snapshot's name.
 * Volumes mounted into the container are not part of the image (they are the volume's).
 */
export class DockerSnapshots {
  constructor(
    private readonly docker: Docker,
    private readonly installationId: string,
  ) {}

  async create(runtimeId: string, name: string, signal?: AbortSignal): Promise<SnapshotResult> {
    const ref = snapshotImage(name);
    // The tag is this name's: an image already there (another installation's, or left over) is not overwritten.
    if (await this.labels(ref, signal)) throw conflict(`snapshot "${name}" already exists on the docker engine (image ${ref})`);
    try {
      await this.docker.getContainer(runtimeId).commit({
        // Query and body apart (docker-modem): the body is the image config merged over the container's.
        _query: { container: runtimeId, repo: `sbx-snapshot/${name}`, tag: 'latest', pause: true, comment: `sbx snapshot ${name}` },
        _body: { Labels: { [LABEL_INSTALLATION]: this.installationId, [LABEL_SNAPSHOT]: name } },
        abortSignal: bounded(signal, COMMIT_TIMEOUT_MS),
      } as never);
    } catch (err) {
      if (signal?.aborted && isAbortError(err)) throw err;
      if (isNotFound(err)) throw new SbxError('not_found', 'snapshot: the sandbox runtime is gone');
      throw toSbxError(err, `snapshot ${name}`);
    }
    const info = await call(
      `snapshot ${name}`,
      (s) => this.docker.getImage(ref).inspect({ abortSignal: s } as Docker.ImageInspectOptions),
      signal,
    );
    return { image: ref, size_bytes: Number(info.Size ?? 0), kernel: null };
  }

  /**
   * Removes the image when it is this installation's (forced: containers started from it keep
   * their layers until they go). Gone already: fine.
   */
  async remove(name: string, signal?: AbortSignal): Promise<void> {
    const ref = snapshotImage(name);
    const labels = await this.labels(ref, signal);
    if (!labels || labels[LABEL_INSTALLATION] !== this.installationId) return;
    try {
      await this.docker.getImage(ref).remove({ force: true, abortSignal: bounded(signal) } as unknown as Docker.ImageRemoveOptions);
    } catch (err) {
      if (isNotFound(err)) return;
      if (signal?.aborted && isAbortError(err)) throw err;
      throw toSbxError(err, `delete snapshot ${name}`);
    }
  }

  /** This installation's snapshot images (by their sbx name), with when each was made. */
  async list(signal?: AbortSignal): Promise<Array<{ name: string; image: string; created_at: string | null }>> {
    const images = (await call(
      'list snapshots',
      (s) =>
        this.docker.listImages({
          filters: { label: [`${LABEL_INSTALLATION}=${this.installationId}`, LABEL_SNAPSHOT] },
          abortSignal: s,
        } as never) as unknown as Promise<unknown>,
      signal,
    )) as Array<{ Labels?: Record<string, string> | null; Created?: number }>;
    return images.flatMap((i) => {
      const name = (i.Labels ?? {})[LABEL_SNAPSHOT];
      return name ? [{ name, image: snapshotImage(name), created_at: i.Created ? new Date(i.Created * 1000).toISOString() : null }] : [];
    });
  }

  /** Before a spawn from snapshot `name`: its image must be here, this installation's image of that snapshot (never pulled). */
  async require(name: string, image: string, signal?: AbortSignal): Promise<void> {
    const labels = image === snapshotImage(name) ? await this.labels(image, signal) : null;
    if (!labels || labels[LABEL_SNAPSHOT] !== name || labels[LABEL_INSTALLATION] !== this.installationId)
      throw new SbxError('provider_error', `snapshot ${name}: its image is missing on the docker engine`);
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
