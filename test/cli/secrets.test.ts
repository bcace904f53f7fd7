/** `sbx secrets set|ls|rm` and `sbx spawn --secret` (DESIGN.md §15), in process against a real server. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;
const VALUE = 'cli-secret-value-71c3e9';

beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
});
afterAll(async () => {
  await server?.close();
});

describe('sbx secrets', () => {
  it('sets from stdin or a file, lists without values, updates, and removes', async () => {
    const made = await sbx(['secrets', 'set', 'API_TOKEN', '--host', 'api.example.com'], { stdin: `${VALUE}\n` });
    expect(made.stderr).toBe('');
    expect(made.stdout).toMatch(/^created secret API_TOKEN \(fingerprint [0-9a-f]{8}; hosts api\.example\.com\)\n$/);

    const listed = await sbx(['secrets']);
    expect(listed.stdout).toMatch(/NAME\s+HOSTS\s+PLAIN HTTP\s+FINGERPRINT\s+UPDATED\n.*API_TOKEN\s+api\.example\.com\s+no\s+[0-9a-f]{8}/);
    const json = JSON.parse((await sbx(['secrets', 'ls', '--json'])).stdout);
    expect(json).toEqual([expect.objectContaining({ name: 'API_TOKEN', hosts: ['api.example.com'], allow_plain_http: false })]);
    expect(listed.stdout + JSON.stringify(json)).not.toContain(VALUE);

    // Set again: a new value from a file (one trailing newline dropped), the hosts kept.
    const file = join(server.dir, 'value.txt');
    writeFileSync(file, `${VALUE}-2\n`);
    const again = await sbx(['secrets', 'set', 'API_TOKEN', '--value-file', file]);
    expect(again.stdout).toMatch(/^updated secret API_TOKEN /);
    const after = JSON.parse((await sbx(['secrets', '--json'])).stdout);
    expect(after[0].fingerprint).not.toBe(json[0].fingerprint);
    expect(after[0].hosts).toEqual(['api.example.com']);

    expect((await sbx(['secrets', 'rm', 'API_TOKEN'])).stdout).toBe('deleted secret API_TOKEN\n');
    expect((await sbx(['secrets'])).stderr).toContain('no secrets');
  });

  it('refuses what it cannot send: no hosts for a new secret, an empty value, a bad name', async () => {
    const noHost = await sbx(['secrets', 'set', 'NEW_ONE'], { stdin: 'v' });
    expect(noHost.code).toBe(2);
    expect(noHost.stderr).toMatch(/needs at least one --host/);
    const empty = await sbx(['secrets', 'set', 'EMPTY', '--host', 'a.test'], { stdin: '' });
    expect(empty.code).toBe(2);
    const bad = await sbx(['secrets', 'set', 'lower', '--host', 'a.test'], { stdin: 'v' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/secret name "lower" is not valid/);
  });

  it('sbx spawn --secret sends the binding (refused here: it needs network filtered, the name must exist)', async () => {
    expect((await sbx(['secrets', 'set', 'BOUND', '--host', 'a.test'], { stdin: 'v' })).code).toBe(0);
    const plain = await sbx(['spawn', '--secret', 'BOUND']);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/secrets need network "filtered"/);
    const unknown = await sbx(['spawn', '--network', 'filtered', '--secret', 'NOPE']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/unknown secret NOPE/);
  });
});
