import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;

beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
});
afterAll(async () => {
  await server?.close();
});

describe('sbx templates', () => {
  it('create, ls, get, update, spawn, rm', async () => {
    const created = await sbx([
      'templates',
      'create',
      'py',
      '--image',
      'python:3.12',
      '--memory',
      '256',
      '--ttl',
      '15m',
      '--meta',
      'lang=py',
    ]);
    expect(created.code).toBe(0);
    expect(created.stdout).toBe('created template py\n');
    const dup = await sbx(['templates', 'create', 'py']);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/^sbx: .*py.*\n$/);

    const ls = await sbx(['templates', 'ls']);
    expect(ls.stdout.split('\n')[0]).toMatch(/^NAME\s+IMAGE\s+PROVIDER\s+MEMORY\s+VCPUS\s+TTL\s+METADATA$/);
    expect(ls.stdout).toMatch(/^py\s+python:3\.12\s+-\s+256 MB\s+-\s+15m\s+lang=py$/m);

    const got = JSON.parse((await sbx(['templates', 'get', 'py', '--json'])).stdout);
    expect(got).toMatchObject({ name: 'py', image: 'python:3.12', memory_mb: 256, ttl: '15m', metadata: { lang: 'py' } });

    const upd = await sbx(['templates', 'update', 'py', '--image', 'python:3.13', '--json']);
    expect(upd.code).toBe(0);
    expect(JSON.parse(upd.stdout)).toMatchObject({ name: 'py', image: 'python:3.13' });

    const spawned = await sbx(['templates', 'spawn', 'py', '--meta', 'run=1']);
    expect(spawned.code).toBe(0);
    const id = spawned.stdout.trim();
    const box = JSON.parse((await sbx(['get', id, '--json'])).stdout);
    expect(box.image).toBe('python:3.13');
    expect(box.metadata.run).toBe('1');

    const viaSpawn = await sbx(['spawn', '--template', 'py', '--json']);
    expect(viaSpawn.code).toBe(0);
    expect(JSON.parse(viaSpawn.stdout).image).toBe('python:3.13');
    const mixed = await sbx(['spawn', '--template', 'py', '--image', 'x']);
    expect(mixed.code).toBe(2);

    expect((await sbx(['templates', 'rm', 'py'])).stdout).toBe('deleted template py\n');
    expect((await sbx(['templates', 'get', 'py'])).code).toBe(4);
    expect((await sbx(['templates', 'spawn', 'py'])).code).toBe(4);
  });
});

describe('sbx quota', () => {
  it('set, get, ls, usage, summary, rm', async () => {
    const set = await sbx(['quota', 'set', 'alice', '--max-sandboxes', '2', '--max-ttl', '1h', '--json']);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ owner_id: 'alice', max_sandboxes: 2 });
    const get = await sbx(['quota', 'get', 'alice']);
    expect(get.stdout).toMatch(/max sandboxes:\s+2/);
    expect(get.stdout).toMatch(/max ttl:\s+1h/);
    const ls = await sbx(['quota', 'ls']);
    expect(ls.stdout).toMatch(/^alice\s+2\s+1h/m);

    await sbx(['spawn', '--owner', 'alice']);
    const usage = JSON.parse((await sbx(['quota', 'usage', 'alice', '--json'])).stdout);
    expect(usage).toMatchObject({ owner_id: 'alice', active_sandboxes: 1, max_sandboxes: 2, quota_configured: true });
    const summary = JSON.parse((await sbx(['quota', 'summary', '--json'])).stdout);
    expect(summary).toMatchObject({ total: 1, with_max_sandboxes: 1, with_max_ttl: 1 });

    await sbx(['spawn', '--owner', 'alice']);
    const third = await sbx(['spawn', '--owner', 'alice']);
    expect(third.code).toBe(5);

    expect((await sbx(['quota', 'set', 'alice'])).code).toBe(2);
    expect((await sbx(['quota', 'set', 'bad owner', '--max-sandboxes', '1'])).code).toBe(1);
    expect((await sbx(['quota', 'rm', 'alice'])).code).toBe(0);
    expect((await sbx(['quota', 'get', 'alice'])).code).toBe(4);
  });
});

describe('sbx providers / workers', () => {
  it('lists providers, shows one, tests them', async () => {
    const ls = await sbx(['providers']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^mock \*\s+yes\s/m);
    const one = JSON.parse((await sbx(['providers', 'mock', '--json'])).stdout);
    expect(one).toMatchObject({ name: 'mock', healthy: true, default: true });
    const test = await sbx(['providers', '--test', '--json']);
    expect(test.code).toBe(0);
    expect(JSON.parse(test.stdout)).toEqual({ mock: true });
    expect((await sbx(['providers', 'firecracker'])).code).toBe(4);
  });

  it('lists workers, with the local worker', async () => {
    const ls = await sbx(['workers']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^local\s+online/m);
    const one = JSON.parse((await sbx(['workers', 'local', '--json'])).stdout);
    expect(one.id).toBe('local');
    expect((await sbx(['workers', 'nope'])).code).toBe(4);
  });
});

describe('sbx logs', () => {
  it('prints console lines, and -f follows new output until cancelled', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    await sbx(['exec', id, '--', 'sh', '-c', 'echo first-line; echo second-line']);
    const logs = await sbx(['logs', id]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain('first-line\n');
    expect(JSON.parse((await sbx(['logs', id, '-n', '1', '--json'])).stdout)).toHaveLength(1);

    const stop = new AbortController();
    const following = sbx(['logs', id, '-f', '-n', '5'], { signal: stop.signal });
    await new Promise((r) => setTimeout(r, 300));
    await sbx(['exec', id, '--', 'echo', 'followed-line']);
    await new Promise((r) => setTimeout(r, 1500));
    stop.abort();
    const r = await following;
    expect(r.code).toBe(0);
    expect(r.stdout.match(/followed-line/g)).toHaveLength(1);
    expect(r.stdout.indexOf('first-line')).toBeLessThan(r.stdout.indexOf('followed-line'));
  });

  it('-f ends when the sandbox is destroyed', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    const following = sbx(['logs', id, '-f']);
    await new Promise((r) => setTimeout(r, 300));
    await sbx(['rm', id]);
    const r = await following;
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`${id} (was destroyed|is gone)`));
  });
});

describe('sbx watch', () => {
  it('prints one line per event (filtered), and NDJSON with --json', async () => {
    const stop = new AbortController();
    const plain = sbx(['watch', '--types', 'sandbox.created,sandbox.destroyed'], { signal: stop.signal });
    const json = sbx(['watch', '--json', '--types', 'sandbox.*'], { signal: stop.signal });
    await new Promise((r) => setTimeout(r, 400));
    const id = (await sbx(['spawn'])).stdout.trim();
    await sbx(['exec', id, '--', 'true']);
    await sbx(['rm', id]);
    await new Promise((r) => setTimeout(r, 400));
    stop.abort();
    const [p, j] = await Promise.all([plain, json]);
    expect(p.code).toBe(0);
    const lines = p.stdout
      .trim()
      .split('\n')
      .filter((l) => l.includes(id));
    expect(lines.map((l) => l.split(' ')[1])).toEqual(['sandbox.created', 'sandbox.destroyed']);
    expect(lines[0]).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\S+ sandbox.created ${id}`));
    const events = j.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e) => e.sandbox_id === id);
    expect(events.map((e) => e.type)).toEqual(['sandbox.created', 'sandbox.running', 'sandbox.destroyed']);
    expect(events.every((e) => typeof e.id === 'number')).toBe(true);
  });

  it('--since replays history after an event id', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    const stop = new AbortController();
    const run = sbx(['watch', '--json', '--since', '0', '--sandbox', id], { signal: stop.signal });
    await new Promise((r) => setTimeout(r, 500));
    stop.abort();
    const r = await run;
    const types = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).type);
    expect(types).toEqual(['sandbox.created', 'sandbox.running']);
  });

  it('exits 6 when the server is unreachable, and 1 on a rejected filter', async () => {
    const down = await sbxAt('http://127.0.0.1:9')(['watch']);
    expect(down.code).toBe(6);
    expect(down.stderr).toContain('http://127.0.0.1:9');
    const bad = await sbx(['watch', '--types', 'bogus.kind']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('bogus.kind');
  });
});
