/** "no such file or directory (ENOENT)" from a Node system error: the reason without the path. */
export function osReason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err?.code === 'EPIPE') return 'its reader closed it (EPIPE)'; // Node's message is only "write EPIPE"
  const text = typeof err?.message === 'string' ? err.message : String(e);
  const m = /^([A-Z0-9_]+): (.*?)(?:, \w+ '.*')?$/s.exec(text);
  if (m) return `${m[2]} (${m[1]})`;
  return err?.code ? `${text} (${err.code})` : text;
}
