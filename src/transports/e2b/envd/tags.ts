import { SbxError } from '../../../core/errors.js';
import type { ProcessRecord } from '../../../core/ports/index.js';
import type { ProcessService } from '../../../core/sandboxes/processes.js';
import type { EnvdTarget } from './target.js';

/** Tags kept at most (the oldest go first): a tag is a name for a running command, not a record. */
const MAX_TAGS = 10_000;
const MAX_TAG_CHARS = 256;

/**
 * E2B's process tags (DESIGN.md §14): a `Start` may name its process with a tag; `List` shows it and
 * every call that selects a process takes it instead of the pid. Kept in this E2B layer, in memory,
 * by sbx process id (a process of one sandbox is never found through another's): a tag is known to
 * the replica that started the process, until that replica restarts — pids work everywhere, always.
 */
export class ProcessTags {
  private readonly tags = new Map<string, { sandboxId: string; tag: string }>();

  /** A tag as given, checked: 1–256 characters, no control characters. */
  static check(tag: string): string {
    if (tag === '' || tag.length > MAX_TAG_CHARS || /\p{Cc}/u.test(tag))
      throw new SbxError('bad_request', `a process tag is 1 to ${MAX_TAG_CHARS} characters without control characters`);
    return tag;
  }

  set(sandboxId: string, processId: string, tag: string): void {
    if (this.tags.size >= MAX_TAGS) this.tags.delete(this.tags.keys().next().value!);
    this.tags.set(processId, { sandboxId, tag });
  }

  tagOf(rec: ProcessRecord): string | undefined {
    const t = this.tags.get(rec.id);
    return t && t.sandboxId === rec.sandbox_id ? t.tag : undefined;
  }

  /** The running process of the target sandbox tagged `tag` (the latest started), else not_found. */
  async find(processes: ProcessService, t: EnvdTarget, tag: string): Promise<ProcessRecord> {
    const all = await processes.list(t.rec.id, t.caller);
    const live = new Set(all.map((p) => p.id));
    // Entries of processes this sandbox no longer lists are dropped as they are seen.
    for (const [id, v] of this.tags) if (v.sandboxId === t.rec.id && !live.has(id)) this.tags.delete(id);
    const tagged = all.filter((p) => p.state === 'running' && this.tagOf(p) === tag);
    const rec = tagged.at(-1);
    if (!rec) throw new SbxError('not_found', `no running process is tagged ${JSON.stringify(tag.slice(0, 64))}`);
    return rec;
  }
}
