import { randomBytes } from 'node:crypto';
import { readdir, rename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { posix } from 'node:path';
import { badRequest } from '../../../../core/errors.js';
import type { GlobPlan } from '../glob.js';
import { errnoOf } from './errors.js';
import { at, closeQuietly, lstatAt, openDirAt } from './walk.js';

/**
 * Walks over directory trees by handle (see walk.ts): each directory is opened from its parent's
 * handle without following links, so a tree that changes underneath never leads out of the root.
 * One handle is held per level, so the depth a walk goes down at once is bounded.
 */
export const MAX_TREE_DEPTH = 256;
/** Upper bound on directory entries one glob may visit, so a pattern over `/` stays cheap. */
const GLOB_MAX_VISITS = 200_000;

const ignoreMissing = (err: unknown) => {
  if (errnoOf(err) !== 'ENOENT') throw err;
};

/** Rounds over a tree whose directories keep coming back (a process inside still writing) before giving up. */
const REMOVE_ROUNDS = 3;
/** Rounds in all: deep trees take one round per MAX_TREE_DEPTH levels. */
const REMOVE_MAX_ROUNDS = 1_000;

/**
 * Removes the directory `name` in `parent` and everything below it; a link is removed, never
 * followed. Subtrees deeper than MAX_TREE_DEPTH are first moved up to the top directory (a rename
 * within the tree), so a tree of any depth goes with a bounded number of open handles.
 */
export async function removeTree(parent: FileHandle, name: string): Promise<void> {
  let top: FileHandle;
  try {
    top = await openDirAt(parent, name);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return;
    // No longer a directory (swapped for a link or a file): the entry itself goes.
    if (code === 'ENOTDIR' || code === 'ELOOP') return unlink(at(parent, name)).catch(ignoreMissing);
    throw err;
  }
  try {
    let stalled = 0;
    for (let round = 1; round <= REMOVE_MAX_ROUNDS; round++) {
      const state = { movedUp: 0 };
      await emptyDir(top, top, 0, state);
      try {
        await rmdir(at(parent, name));
        return;
      } catch (err) {
        const code = errnoOf(err);
        if (code === 'ENOENT') return;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
        // Subtrees moved up are progress; entries that keep appearing are not.
        if (state.movedUp === 0 && ++stalled >= REMOVE_ROUNDS) throw err;
      }
    }
    throw Object.assign(new Error('directory tree kept changing'), { code: 'ENOTEMPTY' });
  } finally {
    await closeQuietly(top);
  }
}

async function emptyDir(dir: FileHandle, top: FileHandle, depth: number, state: { movedUp: number }): Promise<void> {
  for (const n of await readdir(at(dir))) {
    const st = await lstatAt(dir, n);
    if (st === null) continue;
    if (!st.isDirectory()) {
      await unlink(at(dir, n)).catch(ignoreMissing);
      continue;
    }
    if (depth + 1 >= MAX_TREE_DEPTH) {
      await rename(at(dir, n), at(top, `.sbx-rm-${randomBytes(8).toString('hex')}`));
      state.movedUp++;
      continue;
    }
    let child: FileHandle;
    try {
      child = await openDirAt(dir, n);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOTDIR' || code === 'ELOOP') await unlink(at(dir, n)).catch(ignoreMissing);
      else if (code !== 'ENOENT') throw err;
      continue;
    }
    try {
      await emptyDir(child, top, depth + 1, state);
    } finally {
      await closeQuietly(child);
    }
    try {
      await rmdir(at(dir, n));
    } catch (err) {
      // Refilled meanwhile: the next round takes it.
      const code = errnoOf(err);
      if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    }
  }
}

/** Sandbox paths under `dir` (shown under `sbxDir`) that match the plan; links are listed, not descended into. */
export async function globTree(dir: FileHandle, sbxDir: string, plan: GlobPlan, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let visits = 0;
  const walk = async (d: FileHandle, sd: string, level: number): Promise<void> => {
    let entries;
    try {
      entries = await readdir(at(d), { withFileTypes: true });
    } catch {
      return; // removed or unreadable meanwhile
    }
    for (const e of entries) {
      if (++visits > GLOB_MAX_VISITS) throw badRequest(`glob ${pattern} visits more than ${GLOB_MAX_VISITS} entries; narrow it`);
      const sp = posix.join(sd, e.name);
      if (plan.regex.test(sp)) out.push(sp);
      if (!e.isDirectory() || level >= plan.depth || level >= MAX_TREE_DEPTH) continue;
      let child: FileHandle;
      try {
        child = await openDirAt(d, e.name);
      } catch {
        continue; // swapped for a link or removed since the listing
      }
      try {
        await walk(child, sp, level + 1);
      } finally {
        await closeQuietly(child);
      }
    }
  };
  await walk(dir, sbxDir, 1);
  return out;
}
