/**
 * An error as the one line `sparq` prints on stderr: every line of its
 * message kept (joined with '; '), node's file-system errors in words.
 */
/** A message's lines joined with '; ' (a cause on the next line is kept, not dropped). */
export const oneLine = (message: string) =>
  message
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l)
    .join('; ');

/** Node's file-system errors in words ("/x: no such file"), not as "ENOENT: ..., open '/x'"; others as "Name: message". */
export function describeError(e: Error): string {
  const { code, path } = e as NodeJS.ErrnoException;
  const fsReason: Record<string, string> = {
    ENOENT: 'no such file or folder',
    EISDIR: 'is a directory, expected a file',
    ENOTDIR: 'a part of the path is not a directory',
    EACCES: 'permission denied',
    EPERM: 'permission denied',
    ENOSPC: 'no space left on the device',
    EROFS: 'a read-only file system',
  };
  if (code !== undefined && path !== undefined && fsReason[code]) return `${path}: ${fsReason[code]}`;
  return `${e.name}: ${oneLine(e.message)}`;
}
