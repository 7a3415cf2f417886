/**
 * Config paths as written in problems and changes: `inbound.peers.peer45[1].window`.
 * Keys that are plain identifiers are joined with dots; any other key (an id with spaces,
 * braces, colons, dashes, or one that looks like a number) is quoted: `inbound.peers["a b"][0]`.
 * Array indexes are bracketed.
 */
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof seg === 'string' && IDENTIFIER.test(seg)) out += out === '' ? seg : `.${seg}`;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}

/** A value as shown after "got": strings quoted (long ones cut), numbers as written, kinds for the rest. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > 60 ? `${value.slice(0, 57)}...` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Map) return 'a Map';
  if (typeof value === 'function') return 'a function';
  return 'an object';
}
