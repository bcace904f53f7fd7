import { badRequest, notFound, providerError, SbxError } from '../../../../core/errors.js';

export function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? (err as NodeJS.ErrnoException).code : undefined;
}

/** Maps a Node fs error to an SbxError naming the sandbox path only (never the host path). */
export function fsError(err: unknown, p: string): SbxError {
  if (err instanceof SbxError) return err;
  const code = errnoOf(err);
  switch (code) {
    case 'ENOENT':
      return notFound(`${p}: no such file or directory`);
    case 'ENOTDIR':
      return badRequest(`${p}: a component of the path is not a directory`);
    case 'EISDIR':
      return badRequest(`${p} is a directory`);
    case 'ENOTEMPTY':
      return badRequest(`${p} is a directory that is not empty`);
    case 'EEXIST':
      return badRequest(`${p} already exists`);
    case 'ELOOP':
      return badRequest(`${p}: too many levels of symbolic links`);
    case 'ENAMETOOLONG':
      return badRequest(`${p}: file name too long`);
    case 'EACCES':
    case 'EPERM':
      return badRequest(`${p}: permission denied`);
    case 'EROFS':
      return badRequest(`${p}: read-only file system`);
    case 'EXDEV':
      return badRequest(`${p}: cannot move across file systems`);
    case 'EBUSY':
    case 'ETXTBSY':
      return badRequest(`${p} is busy`);
    case 'EMLINK':
      return badRequest(`${p}: too many links`);
    case 'ENXIO':
    case 'ENODEV':
    case 'EOPNOTSUPP':
      return badRequest(`${p} is not a regular file`);
    case 'EINVAL':
      return badRequest(`${p}: invalid operation`);
    case 'ENOSPC':
    case 'EDQUOT':
    case 'EFBIG':
      return new SbxError('resource_limit', 'no space left for the sandbox');
    default:
      return providerError(`file operation on ${p} failed (${code ?? 'unknown error'})`);
  }
}
