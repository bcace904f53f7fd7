/**
 * A client of Firecracker's API over its unix socket (the published description is
 * src/firecracker/swagger/firecracker.yaml in firecracker-microvm/firecracker). Every request has a
 * deadline; a 4xx/5xx answer's `{fault_message}` becomes a typed SbxError whose message carries no
 * host paths (Firecracker's faults often quote them).
 */
import { request } from 'node:http';
import { SbxError } from '../../../core/errors.js';

export const DEFAULT_API_TIMEOUT_MS = 5_000;
/** Bodies Firecracker answers with are small (a fault, the instance info); more is garbage. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export interface MachineConfig {
  vcpu_count: number;
  mem_size_mib: number;
  smt?: boolean;
  track_dirty_pages?: boolean;
}
export interface BootSource {
  kernel_image_path: string;
  boot_args?: string;
  initrd_path?: string;
}
export interface Drive {
  drive_id: string;
  path_on_host: string;
  is_root_device: boolean;
  is_read_only: boolean;
}
export interface NetworkInterface {
  iface_id: string;
  host_dev_name: string;
  guest_mac?: string;
}
export interface Vsock {
  guest_cid: number;
  uds_path: string;
}
export interface SnapshotCreate {
  snapshot_type: 'Full' | 'Diff';
  snapshot_path: string;
  mem_file_path: string;
}
export interface SnapshotLoad {
  snapshot_path: string;
  mem_backend: { backend_type: 'File' | 'Uffd'; backend_path: string };
  resume_vm: boolean;
  network_overrides?: { iface_id: string; host_dev_name: string }[];
  vsock_override?: { uds_path: string };
}
export type ActionType = 'InstanceStart' | 'SendCtrlAltDel' | 'FlushMetrics';

export interface ApiCallOptions {
  signal?: AbortSignal;
  /** Deadline of this request; default the client's. */
  timeoutMs?: number;
}

/** Removes absolute paths from a fault message: they name the host's layout. */
export function redactPaths(text: string): string {
  return text.replace(/(^|[\s"'`(=:])\/[^\s"'`),;:]*/g, '$1<path>');
}

/** A fault Firecracker reported, as a typed error: 400 = the request was refused, other = Firecracker failed. */
export function faultError(status: number, method: string, path: string, body: string): SbxError {
  let fault = '';
  try {
    const parsed = JSON.parse(body) as { fault_message?: unknown };
    if (typeof parsed.fault_message === 'string') fault = parsed.fault_message;
  } catch {
    // not JSON: the body is not quoted at all
  }
  const what = `firecracker refused ${method} ${path} (HTTP ${status})`;
  const message = fault ? `${what}: ${redactPaths(fault).slice(0, 300)}` : what;
  return new SbxError('provider_error', message, { firecracker_status: status });
}

export class FirecrackerApi {
  constructor(
    readonly socketPath: string,
    private readonly defaultTimeoutMs = DEFAULT_API_TIMEOUT_MS,
  ) {}

  /** One request; resolves with the parsed JSON body (undefined for 204), or throws SbxError. */
  call(method: 'GET' | 'PUT' | 'PATCH', path: string, body?: unknown, opts: ApiCallOptions = {}): Promise<unknown> {
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (err: SbxError | null, value?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        if (err) {
          req.destroy();
          reject(err);
        } else resolve(value);
      };
      const onAbort = () => finish(new SbxError('timeout', `firecracker ${method} ${path} was cancelled`));
      const timer = setTimeout(
        () => finish(new SbxError('timeout', `firecracker did not answer ${method} ${path} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const headers: Record<string, string | number> = { accept: 'application/json' };
      if (payload) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = payload.length;
      }
      const req = request({ socketPath: this.socketPath, method, path, headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_RESPONSE_BYTES)
            finish(new SbxError('provider_error', `firecracker answered ${method} ${path} with an oversized body`));
          else chunks.push(c);
        });
        res.on('error', () => finish(new SbxError('unavailable', `firecracker's connection broke during ${method} ${path}`)));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            if (status === 204 || text.length === 0) return finish(null, undefined);
            try {
              finish(null, JSON.parse(text));
            } catch {
              finish(new SbxError('provider_error', `firecracker answered ${method} ${path} with a body that is not JSON`));
            }
          } else finish(faultError(status, method, path, text));
        });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        const gone = err.code === 'ENOENT' || err.code === 'ECONNREFUSED';
        finish(
          new SbxError(
            'unavailable',
            gone
              ? 'the firecracker API socket is not there (the VMM is not running)'
              : `firecracker's API socket failed (${err.code ?? 'error'})`,
          ),
        );
      });
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      req.end(payload);
    });
  }

  private put(path: string, body: unknown, opts?: ApiCallOptions): Promise<void> {
    return this.call('PUT', path, body, opts).then(() => undefined);
  }

  putMachineConfig = (cfg: MachineConfig, opts?: ApiCallOptions) => this.put('/machine-config', cfg, opts);
  putBootSource = (src: BootSource, opts?: ApiCallOptions) => this.put('/boot-source', src, opts);
  putDrive = (drive: Drive, opts?: ApiCallOptions) => this.put(`/drives/${encodeURIComponent(drive.drive_id)}`, drive, opts);
  putNetworkInterface = (nic: NetworkInterface, opts?: ApiCallOptions) =>
    this.put(`/network-interfaces/${encodeURIComponent(nic.iface_id)}`, nic, opts);
  putVsock = (vsock: Vsock, opts?: ApiCallOptions) => this.put('/vsock', vsock, opts);
  action = (action_type: ActionType, opts?: ApiCallOptions) => this.put('/actions', { action_type }, opts);
  setVmState = (state: 'Paused' | 'Resumed', opts?: ApiCallOptions) => this.call('PATCH', '/vm', { state }, opts).then(() => undefined);
  createSnapshot = (p: SnapshotCreate, opts?: ApiCallOptions) => this.put('/snapshot/create', p, opts);
  loadSnapshot = (p: SnapshotLoad, opts?: ApiCallOptions) => this.put('/snapshot/load', p, opts);

  /** `GET /`: the instance's state (`Not started`, `Running`, `Paused`). */
  async describe(opts?: ApiCallOptions): Promise<{ state: string; id?: string }> {
    const info = (await this.call('GET', '/', undefined, opts)) as { state?: unknown; id?: unknown } | undefined;
    if (!info || typeof info.state !== 'string') throw new SbxError('provider_error', 'firecracker answered GET / without a state');
    return { state: info.state, ...(typeof info.id === 'string' ? { id: info.id } : {}) };
  }
}
