/**
 * scripts/check-deps.mjs (DESIGN.md §2 dependency rules) on small fixture trees: a clean tree
 * passes, each planted violation is reported as `file:line imports X (rule)` with exit code 1.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = pathToFileURL(resolve(__dirname, '../../scripts/check-deps.mjs')).href;
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

// The checker itself, in process (the unit tier spawns nothing); the CLI wrapper prints these lines.
const { checkTree } = (await import(SCRIPT)) as { checkTree: (root: string) => string[] };
const violationsOf = (files: Record<string, string>) => checkTree(tree({ ...CLEAN, ...files }));

const CLEAN: Record<string, string> = {
  'bin/sbx.js': "import('../dist/cli.js').then(({ main }) => main(process.argv.slice(2)));\n",
  'src/cli.ts':
    "export async function main() {\n  const { COMMANDS } = await import('./transports/cli/registry.js');\n  return COMMANDS.length;\n}\n",
  'src/transports/cli/registry.ts': "import { serve } from './commands/serve.js';\nexport const COMMANDS = [serve];\n",
  'src/transports/cli/commands/serve.ts':
    "import { SbxError } from '../../../contracts/errors.js';\nexport const serve = async () => {\n  const { " +
    "start } = await import('../../../compose/serve.js');\n  if (!start) throw new SbxError();\n  return start();\n};\n",
  'src/compose/serve.ts':
    "import Fastify from 'fastify';\nimport { loadConfig } from '../config/index.js';\nimport { plan } from " +
    "'../core/plan.js';\nexport const start = () => [Fastify, loadConfig, plan];\n",
  'src/config/index.ts': 'export const loadConfig = () => ({});\n',
  'src/core/plan.ts': "import type { Clock } from './ports.js';\nexport const plan = (clock: Clock) => clock.now();\n",
  'src/core/ports.ts': 'export interface Clock { now(): Date }\n',
  'src/contracts/errors.ts':
    "import { Type } from '@sinclair/typebox';\nexport class SbxError extends Error {}\nexport const T = Type.String();\n",
  'src/client/index.ts':
    "import { request } from 'undici';\nimport type { Readable } from 'node:stream';\nexport { SbxError } from " +
    "'../contracts/errors.js';\nexport type R = Readable;\nexport const r = request;\n",
  'src/adapters/store.ts': "import type { Clock } from '../core/ports.js';\nexport type C = Clock;\n",
};

afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

/** One planted violation per rule of DESIGN.md §2: the file, its import, and the line the checker must print. */
const PLANTED: Array<{ rule: string; files: Record<string, string>; line: string }> = [
  {
    rule: 'core imports only core and shared',
    files: { 'src/core/plan.ts': "import { start } from '../compose/serve.js';\nexport const plan = start;\n" },
    line: 'src/core/plan.ts:1 imports ../compose/serve.js (core imports only core (and the pure helpers of shared))',
  },
  {
    rule: 'core imports no package but node:crypto',
    files: { 'src/core/plan.ts': "import { readFileSync } from 'node:fs';\nexport const plan = readFileSync;\n" },
    line: 'src/core/plan.ts:1 imports node:fs (core imports only core (and node:crypto for hashing))',
  },
  {
    rule: 'core reads time only through the clock',
    files: { 'src/core/plan.ts': 'export const plan = () => Date.now();\n' },
    line: 'src/core/plan.ts:1 reads Date.now() (core reads the time of day only through the Clock port)',
  },
  {
    rule: 'contracts import only the schema library',
    files: { 'src/contracts/errors.ts': "import { z } from 'zod';\nexport class SbxError extends Error {}\nexport const T = z;\n" },
    line: 'src/contracts/errors.ts:1 imports zod (contracts import only the schema library)',
  },
  {
    rule: 'shared imports nothing of the project',
    files: { 'src/shared/bytes.ts': "import type { Clock } from '../core/ports.js';\nexport type C = Clock;\n" },
    line: 'src/shared/bytes.ts:1 imports ../core/ports.js (shared helpers import nothing of the project)',
  },
  {
    rule: 'shared imports only node builtins',
    files: { 'src/shared/bytes.ts': "import chalk from 'chalk';\nexport const c = chalk;\n" },
    line: 'src/shared/bytes.ts:1 imports chalk (shared helpers import only node builtins)',
  },
  {
    rule: 'client imports only contracts and shared',
    files: { 'src/client/index.ts': "// the client\nimport { plan } from '../core/plan.js';\nexport { plan };\n" },
    line: 'src/client/index.ts:2 imports ../core/plan.js (client imports only contracts and shared)',
  },
  {
    rule: 'adapters never import config',
    files: { 'src/adapters/store.ts': "import { loadConfig } from '../config/index.js';\nexport const c = loadConfig;\n" },
    line: 'src/adapters/store.ts:1 imports ../config/index.js (adapters imports only core, contracts, log, shared)',
  },
  {
    rule: 'config imports only contracts, log and shared',
    files: { 'src/config/index.ts': "import { plan } from '../core/plan.js';\nexport const loadConfig = plan;\n" },
    line: 'src/config/index.ts:1 imports ../core/plan.js (config imports only contracts, log, shared)',
  },
  {
    rule: 'log imports only shared',
    files: { 'src/log/index.ts': "import { loadConfig } from '../config/index.js';\nexport const l = loadConfig;\n" },
    line: 'src/log/index.ts:1 imports ../config/index.js (log imports only shared)',
  },
  {
    rule: 'transports never import adapters',
    files: { 'src/transports/http/app.ts': "\n\nimport type { C } from '../../adapters/store.js';\nexport type A = C;\n" },
    line:
      'src/transports/http/app.ts:3 imports ../../adapters/store.js (transports/http imports only core, ' +
      'contracts, client, config, log, transports/shared, shared)',
  },
  {
    rule: 'sibling transports never import each other',
    files: {
      'src/transports/mcp/http.ts': 'export const mcp = 1;\n',
      'src/transports/http/app.ts': "import { mcp } from '../mcp/http.js';\nexport const app = mcp;\n",
    },
    line:
      'src/transports/http/app.ts:1 imports ../mcp/http.js (sibling transports never import each other ' +
      '(what two share lives in transports/shared))',
  },
  {
    rule: 'transports/shared never imports a transport',
    files: {
      'src/transports/http/host.ts': 'export const host = 1;\n',
      'src/transports/shared/framing.ts': "import { host } from '../http/host.js';\nexport const f = host;\n",
    },
    line:
      'src/transports/shared/framing.ts:1 imports ../http/host.js (transports/shared imports only core, ' +
      'contracts, client, config, log, shared)',
  },
  {
    rule: 'a file directly under transports/ is transports/shared',
    files: {
      'src/transports/http/host.ts': 'export const host = 1;\n',
      'src/transports/framing.ts': "import { host } from './http/host.js';\nexport const f = host;\n",
    },
    line:
      'src/transports/framing.ts:1 imports ./http/host.js (transports/shared imports only core, contracts, ' +
      'client, config, log, shared)',
  },
  {
    rule: 'import() obeys the rules',
    files: { 'src/transports/cli/commands/ls.ts': "export const ls = async () => (await import('../../../adapters/store.js')).c;\n" },
    line:
      'src/transports/cli/commands/ls.ts:1 imports ../../../adapters/store.js (transports/cli imports only ' +
      'core, contracts, client, config, log, transports/shared, shared)',
  },
  {
    rule: 'the CLI reaches config only inside a command',
    files: {
      'src/transports/cli/commands/ls.ts': "import { loadConfig } from '../../../config/index.js';\nexport const ls = loadConfig;\n",
    },
    line:
      'src/transports/cli/commands/ls.ts:1 imports ../../../config/index.js (the CLI reaches config only ' +
      'through compose or an import() inside a command)',
  },
  {
    rule: 'only process-starting commands load compose',
    files: { 'src/transports/cli/commands/ls.ts': "export const ls = async () => (await import('../../../compose/serve.js')).start;\n" },
    line:
      'src/transports/cli/commands/ls.ts:1 imports ../../../compose/serve.js (nothing imports compose ' +
      "except the commands that start a process (serve, worker, provider-server, mcp) and doctor's local checks)",
  },
  {
    rule: 'imports stay inside src/',
    files: { 'src/core/plan.ts': "import { x } from '../../scripts/x.js';\nexport const plan = x;\n" },
    line: 'src/core/plan.ts:1 imports ../../scripts/x.js (imports reach only into src/)',
  },
];

describe('check-deps', () => {
  it('passes a tree that keeps the rules (core and clients may use shared; doctor and mcp may load compose)', () => {
    expect(
      violationsOf({
        'src/shared/duration.ts': "import { inspect } from 'node:util';\nexport const d = inspect;\n",
        'src/core/plan.ts': "import { d } from '../shared/duration.js';\nexport const plan = d;\n",
        'src/config/index.ts': "import { d } from '../shared/duration.js';\nexport const loadConfig = d;\n",
        'src/transports/shared/host.ts': "import { d } from '../../shared/duration.js';\nexport const host = d;\n",
        'src/transports/http/app.ts': "import { host } from '../shared/host.js';\nexport const app = host;\n",
        'src/transports/cli/commands/mcp.ts': "export const mcp = async () => (await import('../../../compose/serve.js')).start;\n",
        'src/transports/cli/shared/doctor-local.ts': "export const d = async () => (await import('../../../compose/serve.js')).start;\n",
      }),
    ).toEqual([]);
  });

  it.each(PLANTED)('reports a planted violation: $rule', ({ files, line }) => {
    expect(violationsOf(files)).toEqual([line]);
  });

  it('fails when the CLI start path reaches a heavy module statically, not when a command imports it dynamically', () => {
    expect(
      violationsOf({ 'src/transports/cli/commands/serve.ts': "import Fastify from 'fastify';\nexport const serve = () => Fastify;\n" }),
    ).toEqual([
      'src/cli.ts → src/transports/cli/registry.ts → src/transports/cli/commands/serve.ts imports fastify (the ' +
        'CLI start path never statically imports fastify, better-sqlite3, dockerode, ink, @modelcontextprotocol/sdk)',
    ]);
    expect(
      violationsOf({ 'src/transports/cli/commands/serve.ts': "export const serve = async () => (await import('ink')).render;\n" }),
    ).toEqual([]);
  });
});
