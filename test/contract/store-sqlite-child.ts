/**
 * Runs the SQLite adapter in a separate Node process, to prove two processes can share one file.
 * Node 20 cannot load TypeScript, so the adapter's sources are transpiled (no type check) into a
 * temp directory that links the project's node_modules.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SOURCES = [
  'src/core/errors.ts',
  'src/core/ports',
  'src/adapters/stores/shared',
  'src/adapters/stores/sql',
  'src/adapters/stores/sqlite',
];

const CHILD_SCRIPT = `
import { pathToFileURL } from 'node:url';
const [moduleFile, dbPath, id, nowIso] = process.argv.slice(2);
const { createSqliteStore } = await import(pathToFileURL(moduleFile).href);
const store = await createSqliteStore({ path: dbPath });
await store.migrate();
await store.insertSandbox({
  id, state: 'running', provider: 'mock', image: 'img', memory_mb: 256, vcpus: 1,
  created_at: nowIso, updated_at: nowIso, expires_at: nowIso, metadata: { from: 'child' },
  owner_id: null, worker_id: 'local', runtime_id: null, template: null,
});
const lease = await store.acquireLease('shared-lease', id, 60000, new Date(nowIso));
const sandboxes = (await store.listSandboxes()).map((s) => s.id);
await store.close();
process.stdout.write(JSON.stringify({ lease, sandboxes }));
`;

function sourceFiles(entry: string): string[] {
  const abs = join(ROOT, entry);
  if (abs.endsWith('.ts')) return [abs];
  return readdirSync(abs, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sourceFiles(relative(ROOT, join(abs, d.name))) : d.name.endsWith('.ts') ? [join(abs, d.name)] : [],
  );
}

/** Transpiles the adapter into `dir`; returns the path of the child script. */
export function buildChild(dir: string): { script: string; moduleFile: string } {
  for (const file of SOURCES.flatMap(sourceFiles)) {
    const out = join(dir, relative(ROOT, file)).replace(/\.ts$/, '.js');
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      fileName: file,
    });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, outputText);
  }
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const script = join(dir, 'child.mjs');
  writeFileSync(script, CHILD_SCRIPT);
  return { script, moduleFile: join(dir, 'src/adapters/stores/sqlite/index.js') };
}

export interface ChildResult {
  lease: { holder_id: string; generation: number } | null;
  sandboxes: string[];
}

/** Opens the store at `dbPath` in a new process, migrates, inserts sandbox `id`, tries the shared lease. */
export function runChild(child: { script: string; moduleFile: string }, dbPath: string, id: string, nowIso: string): Promise<ChildResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(process.execPath, [child.script, child.moduleFile, dbPath, id, nowIso], { timeout: 20_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`child ${id} failed: ${err.message}\n${stderr}`));
      else resolvePromise(JSON.parse(stdout) as ChildResult);
    });
  });
}
