import { badRequest } from '../../../../core/errors.js';
import type { FileInfo } from '../../../../core/ports/index.js';
import { HostFs } from '../host-fs.js';

/** A volume directory seen at `guest` (absolute, normalized) inside a sandbox. */
export interface HostMount {
  host: string;
  guest: string;
}

/**
 * A sandbox root with volumes mounted into it (DESIGN.md §10): a path at or under a mount's
 * guest path goes to the volume's directory (confined to it exactly as HostFs confines the root),
 * every other path to the root. A mount point itself can be neither deleted nor moved, and a move
 * never crosses a mount boundary. A glob whose fixed prefix lies in a volume searches the volume.
 */
export class MountedFs {
  constructor(
    readonly rootDir: string,
    private readonly mounts: () => Promise<readonly HostMount[]>,
  ) {}

  private async route(p: string): Promise<{ fs: HostFs; path: string; mount: HostMount | null }> {
    let best: HostMount | null = null;
    if (typeof p === 'string' && p.startsWith('/')) {
      for (const m of await this.mounts()) {
        if ((p === m.guest || p.startsWith(`${m.guest}/`)) && (!best || m.guest.length > best.guest.length)) best = m;
      }
    }
    if (!best) return { fs: new HostFs(this.rootDir), path: p, mount: null };
    return { fs: new HostFs(best.host), path: p === best.guest ? '/' : p.slice(best.guest.length), mount: best };
  }

  private static outer(mount: HostMount | null, p: string): string {
    if (!mount) return p;
    return p === '/' ? mount.guest : `${mount.guest}${p}`;
  }

  async writeFile(p: string, content: Uint8Array, mode: number | undefined): Promise<void> {
    const r = await this.route(p);
    if (r.mount && r.path === '/') throw badRequest(`${p} is a volume's mount point`);
    return r.fs.writeFile(r.path, content, mode);
  }

  async writeFileStream(p: string, body: AsyncIterable<Uint8Array>, mode: () => number | undefined): Promise<void> {
    const r = await this.route(p);
    if (r.mount && r.path === '/') throw badRequest(`${p} is a volume's mount point`);
    return r.fs.writeFileStream(r.path, body, mode);
  }

  async readFile(p: string, maxBytes?: number): Promise<Uint8Array> {
    const r = await this.route(p);
    return r.fs.readFile(r.path, maxBytes);
  }

  async deleteFile(p: string, recursive: boolean): Promise<void> {
    const r = await this.route(p);
    if (r.mount && r.path === '/')
      throw badRequest(`${p} is a volume's mount point: delete the volume (DELETE /api/v1/volumes/NAME) once no sandbox mounts it`);
    return r.fs.deleteFile(r.path, recursive);
  }

  async listFiles(p: string): Promise<FileInfo[]> {
    const r = await this.route(p);
    const list = await r.fs.listFiles(r.path);
    return r.mount ? list.map((f) => ({ ...f, path: MountedFs.outer(r.mount, f.path) })) : list;
  }

  async moveFile(from: string, to: string): Promise<void> {
    const a = await this.route(from);
    const b = await this.route(to);
    if (a.mount?.guest !== b.mount?.guest) throw badRequest(`cannot move ${from} to ${to}: they are on different volumes`);
    if (a.mount && (a.path === '/' || b.path === '/')) throw badRequest("a volume's mount point cannot be moved");
    return a.fs.moveFile(a.path, b.path);
  }

  async chmod(p: string, mode: number): Promise<void> {
    const r = await this.route(p);
    return r.fs.chmod(r.path, mode);
  }

  async stat(p: string): Promise<FileInfo> {
    const r = await this.route(p);
    const info = await r.fs.stat(r.path);
    if (!r.mount) return info;
    return { ...info, path: p, name: r.path === '/' ? p.slice(p.lastIndexOf('/') + 1) : info.name };
  }

  async glob(pattern: string): Promise<string[]> {
    const fixed = pattern.split(/[*?[]/)[0] ?? '';
    const r = await this.route(fixed.endsWith('/') ? fixed.slice(0, -1) || '/' : fixed.slice(0, fixed.lastIndexOf('/')) || '/');
    if (!r.mount) return r.fs.glob(pattern);
    const inner = pattern.slice(r.mount.guest.length) || '/';
    return (await r.fs.glob(inner)).map((p) => MountedFs.outer(r.mount, p)).sort();
  }

  async hostDir(p: string): Promise<string> {
    const r = await this.route(p);
    return r.fs.hostDir(r.path);
  }
}
