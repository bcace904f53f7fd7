/**
 * The in-memory provider's filesystem: one tree per runtime, held in this process. Nothing here
 * touches the host: a symbolic link resolves inside the tree, never outside it. Modes, sizes and
 * modification times behave as the host-backed providers' do (FileInfo of the Provider port).
 */
import { badRequest, notFound } from '../../../core/errors.js';
import type { FileInfo } from '../../../core/ports/index.js';
import { fileTooLarge } from '../../../core/sandboxes/file-bytes.js';
import { MAX_NAME_BYTES } from '../../../core/sandboxes/paths.js';
import { formatMode } from '../shared/file-mode.js';
import { planGlob } from '../shared/glob.js';

interface Base {
  mode: number;
  mtime: number;
}
export interface FileNode extends Base {
  kind: 'file';
  data: Uint8Array;
}
export interface DirNode extends Base {
  kind: 'dir';
  children: Map<string, Node>;
}
export interface LinkNode extends Base {
  kind: 'link';
  target: string;
}
export type Node = FileNode | DirNode | LinkNode;

/** Symbolic links followed while resolving one path (Linux's limit). */
const MAX_LINKS = 40;
const encoder = new TextEncoder();

/** Normalizes `p` against `cwd` (`.`, `..`, repeated slashes); the result is absolute. */
export function resolvePath(cwd: string, p: string): string {
  const segs: string[] = [];
  for (const s of (p.startsWith('/') ? p : `${cwd}/${p}`).split('/')) {
    if (s === '' || s === '.') continue;
    if (s === '..') segs.pop();
    else segs.push(s);
  }
  return `/${segs.join('/')}`;
}

function segmentsOf(p: string): string[] {
  if (!p.startsWith('/')) throw badRequest(`path must be absolute: ${JSON.stringify(p)}`);
  if (p.includes('\0')) throw badRequest('path must not contain NUL bytes');
  const segs = p.split('/').filter((s) => s.length > 0);
  if (segs.some((s) => s === '.' || s === '..')) throw badRequest(`path must be normalized: ${JSON.stringify(p)}`);
  if (segs.some((s) => encoder.encode(s).length > MAX_NAME_BYTES))
    throw badRequest(`path has a component longer than ${MAX_NAME_BYTES} bytes`);
  return segs;
}

/** Where a path leads: its parent directory, its last name (null for `/`) and the entry there, if any. */
interface Located {
  parent: DirNode;
  name: string | null;
  node: Node | undefined;
  /** The path with every link before the last name resolved. */
  path: string;
  /** The last name was a link that was followed (to `node`, or to nothing: a dangling link). */
  viaLink?: boolean;
}

/** A change to the tree, for watches (paths as this tree sees them, links before the last name resolved). */
export type FsChange = { type: 'create' | 'write' | 'remove' | 'chmod'; path: string } | { type: 'rename'; path: string; old_path: string };

export class MemoryFs {
  readonly root: DirNode;
  /** Told of every change made through this tree (the provider's watches). */
  onChange?: (change: FsChange) => void;

  /** A fresh tree (`/`, `/workspace`, `/tmp`), or a view confined to `root` (a pool workspace: its links resolve inside it). */
  constructor(
    readonly now: () => number,
    root?: DirNode,
  ) {
    if (root) {
      this.root = root;
      return;
    }
    this.root = this.dir(0o755);
    this.mkdirs('/workspace', 0o755);
    const tmp = this.mkdirs('/tmp', 0o755);
    tmp.mode = 0o1777;
  }

  private dir(mode: number): DirNode {
    return { kind: 'dir', mode, mtime: this.now(), children: new Map() };
  }

  /**
   * Walks `p`: every link before the last name is followed; the last one too when `followLast`.
   * A missing parent is `not_found` (or created, with `create`); a file as a parent is `not_found`.
   */
  locate(p: string, opts: { followLast: boolean; create?: boolean }, depth = 0): Located {
    const segs = segmentsOf(p);
    let dir = this.root;
    let at = '';
    for (let i = 0; i < segs.length; i++) {
      const name = segs[i]!;
      const last = i === segs.length - 1;
      let node = dir.children.get(name);
      if (last && !(opts.followLast && node?.kind === 'link')) return { parent: dir, name, node, path: `${at}/${name}` };
      if (node?.kind === 'link') {
        if (depth >= MAX_LINKS) throw badRequest(`${p}: too many levels of symbolic links`);
        const target = resolvePath(at || '/', node.target);
        const rest = segs.slice(i + 1).join('/');
        const loc = this.locate(rest ? resolvePath(target, rest) : target, opts, depth + 1);
        return last ? { ...loc, viaLink: true } : loc;
      }
      if (node === undefined && opts.create) {
        node = this.dir(0o755);
        dir.children.set(name, node);
        dir.mtime = this.now();
        this.onChange?.({ type: 'create', path: `${at}/${name}` });
      }
      if (node?.kind !== 'dir') throw notFound(`${p}: no such file or directory`);
      dir = node;
      at = `${at}/${name}`;
    }
    return { parent: dir, name: null, node: dir, path: '/' };
  }

  /** The entry at `p` (links followed), or undefined. */
  lookup(p: string, followLast = true): Node | undefined {
    try {
      return this.locate(p, { followLast }).node;
    } catch {
      return undefined;
    }
  }

  mkdirs(p: string, mode = 0o755): DirNode {
    const loc = this.locate(p, { followLast: true, create: true });
    if (loc.name === null) return this.root;
    if (loc.node === undefined) {
      const d = this.dir(mode);
      loc.parent.children.set(loc.name, d);
      this.onChange?.({ type: 'create', path: loc.path });
      return d;
    }
    if (loc.node.kind !== 'dir') throw badRequest(`${p} is not a directory`);
    return loc.node;
  }

  writeFile(p: string, content: Uint8Array, mode: number | undefined, opts: { append?: boolean } = {}): void {
    const loc = this.locate(p, { followLast: true, create: true });
    if (loc.name === null) throw badRequest('cannot write the sandbox root');
    const node = loc.node;
    if (node?.kind === 'dir') throw badRequest(`${p} is a directory`);
    // As on the host-backed providers: a write never creates the target of a dangling link.
    if (node?.kind === 'link' || (node === undefined && loc.viaLink)) throw badRequest(`${p} is a dangling symbolic link`);
    const data = opts.append && node ? concat(node.data, content) : Uint8Array.from(content);
    if (node) {
      node.data = data;
      node.mtime = this.now();
      if (mode !== undefined) node.mode = mode & 0o7777;
      this.onChange?.({ type: 'write', path: loc.path });
      return;
    }
    loc.parent.children.set(loc.name, { kind: 'file', mode: (mode ?? 0o644) & 0o7777, mtime: this.now(), data });
    loc.parent.mtime = this.now();
    this.onChange?.({ type: 'create', path: loc.path });
    if (data.byteLength > 0) this.onChange?.({ type: 'write', path: loc.path });
  }

  readFile(p: string, maxBytes?: number): Uint8Array {
    const node = this.locate(p, { followLast: true }).node;
    if (node === undefined || node.kind === 'link') throw notFound(`${p}: no such file or directory`);
    if (node.kind === 'dir') throw badRequest(`${p} is a directory`);
    if (maxBytes !== undefined && node.data.byteLength > maxBytes) throw fileTooLarge(node.data.byteLength, maxBytes);
    return node.data.slice();
  }

  deleteFile(p: string, recursive: boolean): void {
    const loc = this.locate(p, { followLast: false });
    if (loc.name === null) throw badRequest('the sandbox root cannot be deleted or moved');
    if (loc.node === undefined) throw notFound(`${p}: no such file or directory`);
    if (loc.node.kind === 'dir' && loc.node.children.size > 0 && !recursive)
      throw badRequest(`${p} is a directory that is not empty; delete it recursively`);
    loc.parent.children.delete(loc.name);
    loc.parent.mtime = this.now();
    this.onChange?.({ type: 'remove', path: loc.path });
  }

  moveFile(from: string, to: string): void {
    const src = this.locate(from, { followLast: false });
    if (src.name === null) throw badRequest('the sandbox root cannot be deleted or moved');
    if (src.node === undefined) throw notFound(`${from}: no such file or directory`);
    const dst = this.locate(to, { followLast: false, create: true });
    if (dst.name === null) throw badRequest('cannot move onto the sandbox root');
    if (dst.path === src.path || dst.path.startsWith(`${src.path}/`)) throw badRequest(`cannot move ${from} into itself`);
    if (dst.node?.kind === 'dir' && (src.node.kind !== 'dir' || dst.node.children.size > 0))
      throw badRequest(`${to} is a directory that is not empty`);
    src.parent.children.delete(src.name);
    dst.parent.children.set(dst.name, src.node);
    src.parent.mtime = dst.parent.mtime = this.now();
    this.onChange?.({ type: 'rename', path: dst.path, old_path: src.path });
  }

  chmod(p: string, mode: number): void {
    const loc = this.locate(p, { followLast: true });
    const node = loc.node;
    if (node === undefined || node.kind === 'link') throw notFound(`${p}: no such file or directory`);
    node.mode = mode & 0o7777;
    this.onChange?.({ type: 'chmod', path: loc.path });
  }

  symlink(target: string, p: string): void {
    const loc = this.locate(p, { followLast: false });
    if (loc.name === null || loc.node !== undefined) throw badRequest(`${p} exists`);
    loc.parent.children.set(loc.name, { kind: 'link', mode: 0o777, mtime: this.now(), target });
    this.onChange?.({ type: 'create', path: loc.path });
  }

  stat(p: string): FileInfo {
    const loc = this.locate(p, { followLast: true });
    if (loc.node === undefined || loc.node.kind === 'link') throw notFound(`${p}: no such file or directory`);
    return this.info(p, loc.node);
  }

  listFiles(p: string): FileInfo[] {
    const node = this.locate(p, { followLast: true }).node;
    if (node === undefined || node.kind === 'link') throw notFound(`${p}: no such file or directory`);
    if (node.kind !== 'dir') throw badRequest(`${p} is not a directory`);
    const out: FileInfo[] = [];
    for (const name of [...node.children.keys()].sort()) {
      const child = this.lookup(p === '/' ? `/${name}` : `${p}/${name}`);
      // A dangling link has nothing to describe.
      if (child && child.kind !== 'link') out.push(this.info(p === '/' ? `/${name}` : `${p}/${name}`, child));
    }
    return out;
  }

  /** Matches sorted; a walk never follows links (a loop cannot hang it). */
  glob(pattern: string): string[] {
    segmentsOf(pattern);
    const plan = planGlob(pattern);
    const base = this.lookup(plan.base);
    if (base === undefined) return [];
    const out: string[] = [];
    const walk = (path: string, node: Node, depth: number) => {
      if (plan.regex.test(path)) out.push(path);
      if (node.kind !== 'dir' || depth >= plan.depth) return;
      for (const [name, child] of node.children) walk(path === '/' ? `/${name}` : `${path}/${name}`, child, depth + 1);
    };
    walk(plan.base, base, 0);
    return out.sort();
  }

  private info(p: string, node: FileNode | DirNode): FileInfo {
    return {
      name: p === '/' ? '/' : p.slice(p.lastIndexOf('/') + 1),
      path: p,
      size: node.kind === 'file' ? node.data.byteLength : 4096,
      is_dir: node.kind === 'dir',
      mod_time: new Date(node.mtime).toISOString(),
      mode: formatMode(node.mode),
    };
  }

  /** A deep copy (snapshots). */
  clone(): MemoryFs {
    const copy = new MemoryFs(this.now);
    const dup = (n: Node): Node =>
      n.kind === 'dir'
        ? { ...n, children: new Map([...n.children].map(([k, v]) => [k, dup(v)])) }
        : n.kind === 'file'
          ? { ...n, data: n.data.slice() }
          : { ...n };
    copy.root.children = (dup(this.root) as DirNode).children;
    return copy;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}
