/**
 * Finding and parsing config files. Parse errors give the position and the parser's reason but
 * never quote the file's text: a config file may hold secrets.
 */
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { extname, join } from 'node:path';
import { cosmiconfig } from 'cosmiconfig';
import { parse as parseYaml } from 'yaml';

/** Working-directory config names, first match wins. */
export const CWD_FILES = ['sbx.yaml', 'sbx.yml', 'sbx.json', '.sbxrc', '.sbxrc.json', '.sbxrc.yaml', '.sbxrc.yml'];
/** Home config names under `<home>/.sbx/`, first match wins. */
export const HOME_FILES = ['config.yaml', 'config.yml', 'config.json'];

/** A file that exists but cannot be read or parsed; the message never contains the file's text. */
export class ConfigFileError extends Error {
  constructor(
    readonly filepath: string,
    readonly reason: string,
  ) {
    super(`${filepath}: ${reason}`);
    this.name = 'ConfigFileError';
  }
}

function lineCol(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n');
  return `line ${before.length}, column ${before[before.length - 1]!.length + 1}`;
}

/** Parses config text: JSON for `.json`, YAML (a JSON superset) otherwise; an empty file is `{}`. */
export function parseConfigText(filepath: string, text: string): unknown {
  if (text.trim() === '') return {};
  if (extname(filepath) === '.json') {
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      const pos = /position (\d+)/.exec((err as Error).message);
      throw new ConfigFileError(filepath, `invalid JSON${pos ? ` at ${lineCol(text, Number(pos[1]))}` : ''}`);
    }
  }
  try {
    return (parseYaml(text) as unknown) ?? {};
  } catch (err) {
    // The first line is the reason and position; the lines after it quote the file.
    const first = ((err as Error).message.split('\n')[0] ?? '').replace(/:$/, '');
    throw new ConfigFileError(filepath, `invalid YAML: ${first}`);
  }
}

/** Reads and parses one config file. */
export async function readConfigFile(filepath: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(filepath, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigFileError(filepath, code === 'ENOENT' ? 'file not found' : `cannot read file (${code ?? 'error'})`);
  }
  return parseConfigText(filepath, text);
}

/** The first `<home>/.sbx/config.{yaml,yml,json}` that exists. */
export function findHomeFile(home: string): string | undefined {
  return HOME_FILES.map((name) => join(home, '.sbx', name)).find((p) => existsSync(p));
}

const parseLoader = (filepath: string, content: string) => parseConfigText(filepath, content);

/** The working-directory config file and its parsed content, looking in `cwd` only (never in parents). */
export async function searchCwdFile(cwd: string): Promise<{ filepath: string; raw: unknown } | undefined> {
  const explorer = cosmiconfig('sbx', {
    searchPlaces: CWD_FILES,
    searchStrategy: 'none',
    mergeSearchPlaces: false,
    ignoreEmptySearchPlaces: false,
    cache: false,
    loaders: { '.json': parseLoader, '.yaml': parseLoader, '.yml': parseLoader, noExt: parseLoader },
  });
  const found = await explorer.search(cwd);
  if (!found) return undefined;
  return { filepath: found.filepath, raw: found.config ?? {} };
}
