/** A configuration that cannot be used; `problems` lists every problem found, each naming its key and source. */
export class ConfigError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = [...problems];
  }
}

/** Collects problems as `key: problem (from source)` so a load reports all of them at once. */
export class Problems {
  readonly list: string[] = [];

  add(key: string, problem: string, source: string): void {
    this.list.push(`${key}: ${problem} (from ${source})`);
  }

  get empty(): boolean {
    return this.list.length === 0;
  }
}
