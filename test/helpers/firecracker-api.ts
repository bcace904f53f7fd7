/**
 * A validating stand-in for Firecracker's API: a node:http server on a unix socket that checks
 * every request against Firecracker's published API description (test/fixtures/firecracker.yaml,
 * vendored from firecracker-microvm/firecracker) and against the order rules Firecracker applies,
 * answering 204 or 400 `{fault_message}` as Firecracker does. It boots nothing.
 *
 * From the description: known path + method; the body parameter's schema ($ref, type, required,
 * enum, minimum/maximum, items); "Pre-boot only" / "Post-boot only" from each operation's summary;
 * from its prose: snapshot/create only while Paused, snapshot/load only on a fresh process, exactly
 * one of mem_file_path / mem_backend, virtio-block drives need path_on_host and is_read_only.
 * Unknown fields are refused (Firecracker's parser rejects them: serde `deny_unknown_fields`).
 * Stricter than Firecracker (sbx's own rule): machine-config must be set before InstanceStart.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

type Schema = Record<string, unknown>;
interface Operation {
  body?: { schema: Schema; required: boolean };
  preBootOnly: boolean;
  postBootOnly: boolean;
}
interface Route {
  template: string;
  regex: RegExp;
  params: string[];
  ops: Map<string, Operation>;
}

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'firecracker.yaml');

export interface ApiDescription {
  version: string;
  routes: Route[];
  definitions: Record<string, Schema>;
}

let cached: ApiDescription | undefined;
export function loadDescription(): ApiDescription {
  if (cached) return cached;
  const doc = parse(readFileSync(FIXTURE, 'utf8')) as {
    info: { version: string };
    paths: Record<string, Record<string, Schema>>;
    definitions: Record<string, Schema>;
  };
  const routes: Route[] = Object.entries(doc.paths).map(([template, methods]) => {
    const params: string[] = [];
    const regex = new RegExp('^' + template.replace(/\{([^}]+)\}/g, (_m, p: string) => (params.push(p), '([^/]+)')) + '$');
    const ops = new Map<string, Operation>();
    for (const [method, op] of Object.entries(methods)) {
      const bodyParam = ((op.parameters as Schema[] | undefined) ?? []).find((p) => p.in === 'body');
      const summary = String(op.summary ?? '');
      ops.set(method.toUpperCase(), {
        ...(bodyParam ? { body: { schema: bodyParam.schema as Schema, required: bodyParam.required === true } } : {}),
        preBootOnly: summary.includes('Pre-boot only'),
        postBootOnly: summary.includes('Post-boot only'),
      });
    }
    return { template, regex, params, ops };
  });
  cached = { version: doc.info.version, routes, definitions: doc.definitions };
  return cached;
}

/** Problems of `value` against `schema`; empty when it conforms. */
export function validate(schema: Schema, value: unknown, defs: Record<string, Schema>, at = 'body'): string[] {
  if (typeof schema.$ref === 'string') return validate(defs[schema.$ref.replace('#/definitions/', '')]!, value, defs, at);
  const errs: string[] = [];
  const type = schema.type as string | undefined;
  const typeOk =
    type === undefined ||
    (type === 'object' && typeof value === 'object' && value !== null && !Array.isArray(value)) ||
    (type === 'array' && Array.isArray(value)) ||
    (type === 'string' && typeof value === 'string') ||
    (type === 'boolean' && typeof value === 'boolean') ||
    (type === 'integer' && Number.isInteger(value)) ||
    (type === 'number' && typeof value === 'number');
  if (!typeOk) return [`${at}: expected ${type}`];
  if (Array.isArray(schema.enum) && !schema.enum.includes(value))
    errs.push(`${at}: ${JSON.stringify(value)} is not one of ${schema.enum.join(', ')}`);
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) errs.push(`${at}: below the minimum ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) errs.push(`${at}: above the maximum ${schema.maximum}`);
  }
  if (type === 'array' && schema.items)
    (value as unknown[]).forEach((v, i) => errs.push(...validate(schema.items as Schema, v, defs, `${at}[${i}]`)));
  if (type === 'object') {
    const obj = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    for (const r of (schema.required as string[] | undefined) ?? []) if (!(r in obj)) errs.push(`${at}: missing required field ${r}`);
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) errs.push(...validate(props[k], v, defs, `${at}.${k}`));
      else if (schema.additionalProperties !== true) errs.push(`${at}: unknown field ${k}`);
    }
  }
  return errs;
}

export interface RecordedRequest {
  method: string;
  path: string;
  body: unknown;
  status: number;
  fault?: string;
}

export type VmState = 'Not started' | 'Running' | 'Paused';

/** What the fake VM is told, so a test can act on a start, a load or a snapshot. */
export interface FakeVmHooks {
  onStart?(cfg: FakeApiState): Promise<void> | void;
  onSnapshotCreate?(body: { snapshot_path: string; mem_file_path: string }, cfg: FakeApiState): Promise<void> | void;
  /** Throws to refuse the load (its message is the fault). */
  onSnapshotLoad?(body: Record<string, unknown>, cfg: FakeApiState): Promise<void> | void;
  onCtrlAltDel?(): void;
}

export interface FakeApiState {
  state: VmState;
  machineConfig?: Record<string, unknown>;
  bootSource?: Record<string, unknown>;
  drives: Map<string, Record<string, unknown>>;
  nics: Map<string, Record<string, unknown>>;
  vsock?: Record<string, unknown>;
  /** Anything other than logger/metrics configured: snapshot/load is refused then. */
  configured: boolean;
}

export interface FakeFirecrackerApi {
  server: Server;
  state: FakeApiState;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

class Fault extends Error {}

/** Starts the validating server on `socketPath`. `hang: true` accepts connections and never answers. */
export async function startFakeFirecrackerApi(
  socketPath: string,
  hooks: FakeVmHooks = {},
  options: { hang?: boolean } = {},
): Promise<FakeFirecrackerApi> {
  const desc = loadDescription();
  const state: FakeApiState = { state: 'Not started', drives: new Map(), nics: new Map(), configured: false };
  const requests: RecordedRequest[] = [];

  async function handle(method: string, url: string, raw: string): Promise<{ status: number; body?: unknown }> {
    const route = desc.routes.find((r) => r.regex.test(url));
    const op = route?.ops.get(method);
    if (!route || !op) throw new Fault(`Invalid request method and/or path: ${method} ${url}.`);
    const params = Object.fromEntries(route.params.map((p, i) => [p, decodeURIComponent(route.regex.exec(url)![i + 1]!)]));
    let body: unknown;
    if (raw.length) {
      try {
        body = JSON.parse(raw);
      } catch {
        throw new Fault('An error occurred when deserializing the json body of a request: not JSON.');
      }
    }
    if (op.body) {
      if (body === undefined && op.body.required) throw new Fault('Empty request body.');
      if (body !== undefined) {
        const errs = validate(op.body.schema, body, desc.definitions);
        if (errs.length) throw new Fault(`An error occurred when deserializing the json body of a request: ${errs.join('; ')}.`);
      }
    } else if (body !== undefined) throw new Fault('This request takes no body.');
    const started = state.state !== 'Not started';
    if (op.preBootOnly && started)
      throw new Fault(`The requested operation is not supported after starting the microVM: ${method} ${route.template}.`);
    if (op.postBootOnly && !started)
      throw new Fault(`The requested operation is not supported before starting the microVM: ${method} ${route.template}.`);
    const b = (body ?? {}) as Record<string, unknown>;
    const key = `${method} ${route.template}`;
    switch (key) {
      case 'GET /':
        return { status: 200, body: { id: 'anonymous-instance', state: state.state, vmm_version: desc.version, app_name: 'Firecracker' } };
      case 'PUT /machine-config':
        state.machineConfig = b;
        break;
      case 'PUT /boot-source':
        state.bootSource = b;
        break;
      case 'PUT /drives/{drive_id}':
        if (b.drive_id !== params.drive_id) throw new Fault('The id from the path does not match the id from the body!');
        if (!('socket' in b) && (typeof b.path_on_host !== 'string' || typeof b.is_read_only !== 'boolean'))
          throw new Fault('A virtio-block drive needs path_on_host and is_read_only.');
        if (b.is_root_device === true && [...state.drives.values()].some((d) => d.is_root_device === true && d.drive_id !== b.drive_id))
          throw new Fault('A root block device already exists!');
        state.drives.set(String(b.drive_id), b);
        break;
      case 'PUT /network-interfaces/{iface_id}':
        if (b.iface_id !== params.iface_id) throw new Fault('The id from the path does not match the id from the body!');
        state.nics.set(String(b.iface_id), b);
        break;
      case 'PUT /vsock':
        state.vsock = b;
        break;
      case 'PUT /actions':
        if (b.action_type === 'InstanceStart') {
          if (started) throw new Fault('The microVM is already running.');
          if (!state.bootSource) throw new Fault('Cannot start microvm without kernel configuration.');
          if (![...state.drives.values()].some((d) => d.is_root_device === true))
            throw new Fault('Cannot start microvm without a root block device.');
          if (!state.machineConfig) throw new Fault('sbx rule: machine-config must be set before InstanceStart.');
          await hooks.onStart?.(state);
          state.state = 'Running';
        } else if (b.action_type === 'SendCtrlAltDel') {
          if (!started) throw new Fault('The microVM is not running.');
          hooks.onCtrlAltDel?.();
        }
        return { status: 204 };
      case 'PATCH /vm':
        if (!started) throw new Fault('The microVM is not started.');
        state.state = b.state === 'Paused' ? 'Paused' : 'Running';
        return { status: 204 };
      case 'PUT /snapshot/create':
        if (state.state !== 'Paused') throw new Fault('Cannot create a snapshot while the microVM is not paused.');
        await hooks.onSnapshotCreate?.(b as { snapshot_path: string; mem_file_path: string }, state);
        return { status: 204 };
      case 'PUT /snapshot/load':
        if (state.configured) throw new Fault('Loading a microVM snapshot not allowed after configuring boot-specific resources.');
        if ('mem_file_path' in b === 'mem_backend' in b) throw new Fault('Exactly one of mem_file_path and mem_backend must be given.');
        try {
          await hooks.onSnapshotLoad?.(b, state);
        } catch (err) {
          throw new Fault(`Load snapshot error: ${(err as Error).message}`);
        }
        state.state = b.resume_vm === true ? 'Running' : 'Paused';
        return { status: 204 };
    }
    if (!['PUT /logger', 'PUT /metrics'].includes(key) && method === 'PUT') state.configured = true;
    return { status: 204 };
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (options.hang) return; // never answered
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const method = req.method ?? '';
      const path = req.url ?? '';
      let parsedBody: unknown = raw;
      try {
        parsedBody = raw ? JSON.parse(raw) : undefined;
      } catch {
        // recorded as text
      }
      handle(method, path, raw).then(
        ({ status, body }) => {
          requests.push({ method, path, body: parsedBody, status });
          res.writeHead(status, body ? { 'content-type': 'application/json' } : {});
          res.end(body ? JSON.stringify(body) : undefined);
        },
        (err: Error) => {
          const fault = err instanceof Fault ? err.message : `Internal error: ${err.message}`;
          const status = err instanceof Fault ? 400 : 500;
          requests.push({ method, path, body: parsedBody, status, fault });
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ fault_message: fault }));
        },
      );
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    server,
    state,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
