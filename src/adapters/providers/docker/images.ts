import type Docker from 'dockerode';
import { badRequest, isAbortError, SbxError } from '../../../core/errors.js';
import { bounded, isNotFound, statusOf, toSbxError } from './errors.js';
import type { ResolvedOptions } from './options.js';

/** What a spawn needs to know of its image: its configured user (`Config.User`, '' for none), id and labels (null: unknown). */
export interface ImageFacts {
  user: string;
  id: string | null;
  labels: Record<string, string> | null;
}

const facts = (info: Docker.ImageInspectInfo): ImageFacts => ({
  user: info.Config?.User ?? '',
  id: info.Id ?? null,
  labels: info.Config?.Labels ?? {},
});

interface PullProgress {
  status?: string;
  progress?: string;
  error?: string;
  errorDetail?: unknown;
}

/**
 * Makes sure `image` is present locally, pulling it when it is not. Concurrent spawns of one
 * image share one pull. A failed or timed-out pull is `provider_error` naming the image, never a
 * hang; the engine's own error text is not passed on (it may echo registry credentials).
 */
export class ImageCache {
  private readonly inflight = new Map<string, Promise<void>>();

  constructor(
    private readonly docker: Docker,
    private readonly opts: ResolvedOptions,
  ) {}

  /** Whether the engine has the image now (no pull); an engine that cannot be asked throws. */
  async present(image: string, signal?: AbortSignal): Promise<boolean> {
    if (!REFERENCE_CHARS.test(image)) return false;
    try {
      await this.docker.getImage(image).inspect({ abortSignal: bounded(signal) } as Docker.ImageInspectOptions);
      return true;
    } catch (err) {
      if (isNotFound(err) || statusOf(err) === 400) return false;
      throw toSbxError(err, `image ${image}`);
    }
  }

  /** Makes sure the image is here; answers what it is (user, id, labels). */
  async ensure(image: string, signal?: AbortSignal): Promise<ImageFacts> {
    // Only the characters a reference can hold; the engine checks the grammar itself (a 400 below).
    if (!REFERENCE_CHARS.test(image)) throw invalidReference(image);
    try {
      return facts(await this.docker.getImage(image).inspect({ abortSignal: bounded(signal) } as Docker.ImageInspectOptions));
    } catch (err) {
      if (!isNotFound(err)) {
        if (signal?.aborted && isAbortError(err)) throw err;
        // The name is all an inspect takes: a 400 means the engine cannot parse it.
        if (statusOf(err) === 400) throw invalidReference(image);
        throw toSbxError(err, `image ${image}`);
      }
    }
    let p = this.inflight.get(image);
    if (!p) {
      p = this.pull(image).finally(() => this.inflight.delete(image));
      this.inflight.set(image, p);
    }
    // The shared pull is not cancelled by one caller going away; the caller just stops waiting.
    await abortable(p, signal);
    try {
      return facts(await this.docker.getImage(image).inspect({ abortSignal: bounded(signal) } as Docker.ImageInspectOptions));
    } catch {
      return { user: '?', id: null, labels: null }; // unknown: no agent for this spawn (agent.ts); the name was judged
    }
  }

  private pull(image: string): Promise<void> {
    const { onPull, registryAuth, pullTimeoutMs } = this.opts;
    const report = (status: string, progress?: string) => {
      try {
        onPull?.({ image, status, ...(progress ? { progress } : {}) });
      } catch {
        // a faulty listener never breaks a spawn
      }
    };
    const failed = (why: string) => new SbxError('provider_error', `image ${image} could not be pulled: ${why}`);
    return new Promise<void>((resolve, reject) => {
      const signal = AbortSignal.timeout(pullTimeoutMs);
      let settled = false;
      const settle = (err?: SbxError) => {
        if (settled) return;
        settled = true;
        if (err) {
          report('failed');
          reject(err);
        } else {
          report('complete');
          resolve();
        }
      };
      report('pulling');
      const pullOpts: Record<string, unknown> = { abortSignal: signal };
      if (registryAuth) pullOpts.authconfig = registryAuth;
      this.docker.pull(image, pullOpts, (err: unknown, stream?: NodeJS.ReadableStream) => {
        if (err || !stream) {
          if (statusOf(err) === 400) settle(invalidReference(image));
          else settle(failed(isNotFound(err) ? 'not found in the registry' : 'registry unreachable or access denied'));
          return;
        }
        signal.addEventListener('abort', () => {
          (stream as unknown as { destroy?: () => void }).destroy?.();
          settle(failed(`timed out after ${Math.round(pullTimeoutMs / 1000)}s`));
        });
        this.docker.modem.followProgress(
          stream,
          (doneErr: unknown, output: PullProgress[] | undefined) => {
            // The engine reports most pull failures in-band, as an `error` member of the last event.
            const inBand = output?.find((o) => o && (o.error || o.errorDetail));
            if (doneErr || inBand) settle(failed('the registry refused or the image does not exist'));
            else settle();
          },
          (ev: PullProgress) => {
            if (ev && typeof ev.status === 'string') report(ev.status, typeof ev.progress === 'string' ? ev.progress : undefined);
          },
        );
      });
    });
  }
}

const REFERENCE_CHARS = /^\w[\w.:/@+-]{0,511}$/;

function invalidReference(image: string): SbxError {
  const shown = image.length > 200 ? `${JSON.stringify(image.slice(0, 200))}…` : JSON.stringify(image);
  return badRequest(`invalid image reference ${shown}: expected [registry/]name[:tag][@digest] with a lowercase name`);
}

function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
