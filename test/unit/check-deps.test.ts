/**
 * scripts/check-deps.mjs (DESIGN.md §2 dependency rules) on small fixture trees: a clean tree
 * passes, each planted violation is reported as `file:line imports X (rule)` with exit code 1.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = resolve(__dirname, '../../scripts/check-deps.mjs');
const roots: string[] = [];

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'sbx-check-deps-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

function run(root: string) {
  const r = spawnSync(process.execPath, [SCRIPT, root], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const CLEAN: Record<string, string> = {
  'bin/sbx.js': "import('../dist/cli.js').then(({ main }) => main(process.argv.slice(2)));\n",
  'src/cli.ts':
    "export async function main() {\n  const { COMMANDS } = await import('./transports/cli/registry.js');\n  return COMMANDS.length;\n}\n",
  'src/transports/cli/registry.ts': "import { serve } from './commands/serve.js';\nexport const COMMANDS = [serve];\n",
  'src/transports/cli/commands/serve.ts':
    "import { SbxError } from '../../../contracts/errors.js';\nexport const serve = async () => {\n  const { start } = await import('../../../compose/serve.js');\n  if (!start) throw new SbxError();\n  return start();\n};\n",
  'src/compose/serve.ts':
    "import Fastify from 'fastify';\nimport { loadConfig } from '../config/index.js';\nimport { plan } from '../core/plan.js';\nexport const start = () => [Fastify, loadConfig, plan];\n",
  'src/config/index.ts': 'export const loadConfig = () => ({});\n',
  'src/core/plan.ts': "import type { Clock } from './ports.js';\nexport const plan = (clock: Clock) => clock.now();\n",
  'src/core/ports.ts': 'export interface Clock { now(): Date }\n',
  'src/contracts/errors.ts':
    "import { Type } from '@sinclair/typebox';\nexport class SbxError extends Error {}\nexport const T = Type.String();\n",
  'src/client/index.ts':
    "import { request } from 'undici';\nimport type { Readable } from 'node:stream';\nexport { SbxError } from '../contracts/errors.js';\nexport type R = Readable;\nexport const r = request;\n",
  'src/adapters/store.ts': "import type { Clock } from '../core/ports.js';\nexport type C = Clock;\n",
};

afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

describe('check-deps', () => {
  it('passes a tree that keeps the rules', () => {
    const r = run(tree(CLEAN));
    expect(r.err).toBe('');
    expect(r.out).toBe('check-deps: ok\n');
    expect(r.code).toBe(0);
  });

  it('reports each planted layer violation with file, line, specifier and rule', () => {
    const r = run(
      tree({
        ...CLEAN,
        'src/client/index.ts': "// the client\nimport { SbxError } from '../core/errors.js';\nexport { SbxError };\n",
        'src/core/errors.ts': 'export class SbxError extends Error {}\n',
        'src/core/plan.ts':
          "import { readFileSync } from 'node:fs';\nimport { start } from '../compose/serve.js';\nexport const plan = () => [readFileSync, start, Date.now()];\n",
        'src/adapters/store.ts': "import { loadConfig } from '../config/index.js';\nexport const c = loadConfig;\n",
        'src/transports/http/app.ts': "\n\nimport { c } from '../../adapters/store.js';\nexport const app = c;\n",
        'src/contracts/errors.ts': "import { z } from 'zod';\nexport class SbxError extends Error {}\nexport const T = z;\n",
        'src/transports/cli/commands/ls.ts': "import { loadConfig } from '../../../config/index.js';\nexport const ls = loadConfig;\n",
      }),
    );
    expect(r.code).toBe(1);
    const lines = r.err.trim().split('\n');
    expect(lines).toContain('src/client/index.ts:2 imports ../core/errors.js (client imports only contracts)');
    expect(lines).toContain('src/core/plan.ts:1 imports node:fs (core imports only core (and node:crypto for hashing))');
    expect(lines).toContain('src/core/plan.ts:2 imports ../compose/serve.js (core imports only core)');
    expect(lines).toContain('src/core/plan.ts:3 reads Date.now() (core reads the time of day only through the Clock port)');
    expect(lines).toContain('src/adapters/store.ts:1 imports ../config/index.js (adapters never import transports, compose or config)');
    expect(lines).toContain('src/transports/http/app.ts:3 imports ../../adapters/store.js (transports never import adapters)');
    expect(lines).toContain('src/contracts/errors.ts:1 imports zod (contracts import only the schema library)');
    expect(lines).toContain(
      'src/transports/cli/commands/ls.ts:1 imports ../../../config/index.js (the CLI reaches config only through compose or an import() inside a command)',
    );
    expect(lines.at(-1)).toBe('check-deps: 8 violation(s) of the dependency rules (DESIGN.md §2)');
  });

  it('fails when the CLI start path reaches a heavy module statically, not when a command imports it dynamically', () => {
    const heavy = tree({
      ...CLEAN,
      'src/transports/cli/commands/serve.ts': "import Fastify from 'fastify';\nexport const serve = () => Fastify;\n",
    });
    const r = run(heavy);
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      'src/cli.ts → src/transports/cli/registry.ts → src/transports/cli/commands/serve.ts imports fastify (the CLI start path never statically imports fastify, better-sqlite3, dockerode, ink, @modelcontextprotocol/sdk)',
    );

    const lazy = tree({
      ...CLEAN,
      'src/transports/cli/commands/serve.ts': "export const serve = async () => (await import('ink')).render;\n",
    });
    expect(run(lazy).code).toBe(0);
  });

  it('lets only the serve, worker and provider-server commands load compose', () => {
    const r = run(
      tree({
        ...CLEAN,
        'src/transports/cli/commands/ls.ts': "export const ls = async () => (await import('../../../compose/serve.js')).start;\n",
      }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      'src/transports/cli/commands/ls.ts:1 imports ../../../compose/serve.js (nothing imports compose except the serve, worker and provider-server commands)',
    );
  });
});
