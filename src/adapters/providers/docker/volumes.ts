import type Docker from 'dockerode';
import { conflict, isAbortError, providerError } from '../../../core/errors.js';
import { LABEL_INSTALLATION } from './containers.js';
import { bounded, call, isNotFound, statusOf, toSbxError } from './errors.js';

/** Label naming the sbx volume a docker volume holds. */
export const LABEL_VOLUME = 'sbx.volume';

/** The docker volume behind sbx volume `name`. */
export function dockerVolumeName(name: string): string {
  return `sbx-vol-${name}`;
}

/**
 * Volumes as docker named volumes (DESIGN.md §10), labelled with this installation's id: a
 * volume of the same name made by another installation (or by hand) is never adopted, mounted or
 * removed. Sizes come from the engine's disk-usage report (`/system/df`), null when it has none.
 */
export class DockerVolumes {
  constructor(
    private readonly docker: Docker,
    private readonly installationId: string,
  ) {}

  async create(name: string, signal?: AbortSignal): Promise<void> {
    await call(
      `create volume ${name}`,
      (s) =>
        this.docker.createVolume({
          Name: dockerVolumeName(name),
          Labels: { [LABEL_INSTALLATION]: this.installationId, [LABEL_VOLUME]: name },
          abortSignal: s,
        } as Docker.VolumeCreateOptions),
      signal,
    );
    // The engine answers an existing volume of that name as if it made it: only ours is adopted.
    const info = (await call(
      `volume ${name}`,
      (s) => this.docker.getVolume(dockerVolumeName(name)).inspect({ abortSignal: s } as never) as unknown as Promise<unknown>,
      signal,
    )) as { Labels?: Record<string, string> | null };
    if ((info.Labels ?? {})[LABEL_INSTALLATION] !== this.installationId)
      throw conflict(`volume "${name}": the docker volume ${dockerVolumeName(name)} exists and is not this installation's`);
  }

  /** Idempotent; `conflict` while a container uses it; another installation's volume is left alone. */
  async remove(name: string, signal?: AbortSignal): Promise<void> {
    const vol = this.docker.getVolume(dockerVolumeName(name));
    try {
      const info = (await vol.inspect({ abortSignal: bounded(signal) } as never)) as unknown as { Labels?: Record<string, string> | null };
      if ((info.Labels ?? {})[LABEL_INSTALLATION] !== this.installationId) return;
      await vol.remove({ abortSignal: bounded(signal) } as never);
    } catch (err) {
      if (isNotFound(err)) return;
      if (signal?.aborted && isAbortError(err)) throw err;
      if (statusOf(err) === 409) throw conflict(`volume ${name} is in use by a container`);
      throw toSbxError(err, `delete volume ${name}`);
    }
  }

  /** Checks each volume a spawn mounts is there and ours (the engine would silently make a missing one). */
  async mounts(volumes: ReadonlyArray<{ name: string; mount_path: string }>, signal?: AbortSignal): Promise<Docker.MountSettings[]> {
    const out: Docker.MountSettings[] = [];
    for (const v of volumes) {
      let labels: Record<string, string>;
      try {
        const info = (await this.docker
          .getVolume(dockerVolumeName(v.name))
          .inspect({ abortSignal: bounded(signal) } as never)) as unknown as { Labels?: Record<string, string> | null };
        labels = info.Labels ?? {};
      } catch (err) {
        if (isNotFound(err)) throw providerError(`volume ${v.name} is missing on the docker engine`);
        if (signal?.aborted && isAbortError(err)) throw err;
        throw toSbxError(err, `volume ${v.name}`);
      }
      if (labels[LABEL_INSTALLATION] !== this.installationId)
        throw providerError(`volume ${v.name}: the docker volume is not this installation's`);
      out.push({ Type: 'volume', Source: dockerVolumeName(v.name), Target: v.mount_path, ReadOnly: false });
    }
    return out;
  }

  /** This installation's volumes on the engine (by their sbx name), with when each was made. */
  async list(signal?: AbortSignal): Promise<Array<{ name: string; created_at: string | null }>> {
    const r = (await call(
      'list volumes',
      (s) =>
        this.docker.listVolumes({
          filters: { label: [`${LABEL_INSTALLATION}=${this.installationId}`] },
          abortSignal: s,
        } as never) as unknown as Promise<unknown>,
      signal,
    )) as { Volumes?: Array<{ Labels?: Record<string, string> | null; CreatedAt?: string }> | null };
    return (r.Volumes ?? []).flatMap((v) => {
      const name = (v.Labels ?? {})[LABEL_VOLUME];
      return name ? [{ name, created_at: v.CreatedAt ? new Date(v.CreatedAt).toISOString() : null }] : [];
    });
  }

  /** Bytes per volume from the engine's disk-usage report; null when the engine reports none (-1) or lacks the volume. */
  async sizes(names: readonly string[], signal?: AbortSignal): Promise<Record<string, number | null>> {
    const df = (await call<unknown>(
      'volume sizes',
      (s) => this.docker.df({ abortSignal: s } as never) as unknown as Promise<unknown>,
      signal,
      120_000,
    )) as { Volumes?: Array<{ Name?: string; Labels?: Record<string, string> | null; UsageData?: { Size?: number } | null }> | null };
    const byName = new Map(
      (df.Volumes ?? [])
        .filter((v) => (v.Labels ?? {})[LABEL_INSTALLATION] === this.installationId)
        .map((v) => [v.Name, v.UsageData?.Size]),
    );
    const out: Record<string, number | null> = {};
    for (const n of names) {
      const size = byName.get(dockerVolumeName(n));
      out[n] = typeof size === 'number' && size >= 0 ? size : null;
    }
    return out;
  }
}
