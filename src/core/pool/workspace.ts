import { SbxError } from '../errors.js';
import type { WorkspaceSpec } from '../ports.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** `/workspace/<name>` inside the shared runtime (DESIGN.md §8); the name must be a plain one. */
export function workspacePath(ws: WorkspaceSpec): string {
  if (!NAME.test(ws.name) || ws.name.includes('..'))
    throw new SbxError('bad_request', `workspace name ${JSON.stringify(ws.name)} is not a plain name`);
  return `/workspace/${ws.name}`;
}
