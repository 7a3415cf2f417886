/**
 * The shape of a JSON text, read in one pass beside JSON.parse.
 *
 * How deep it nests, read before it is parsed: JSON.parse takes thousands of levels, but what
 * walks the value after it (a reviver, jsonc-parser's visitor for repeated keys, a validator)
 * recurses once per level, and a few kilobytes of `[[[[…` overflowed the stack: a stack trace on
 * the command line, a 500 from the sidecar. No configuration or request nests anywhere near
 * this bound.
 *
 * With `keys`, also the first key given twice in one object (JSON.parse keeps the last and says
 * nothing), for the sidecar's small bodies: jsonc-parser's visitor, which the configuration's
 * files use for their line numbers, cost 4 to 9 times JSON.parse on a body. Keys compare decoded
 * ("a" and "\u0061" are one key); the path names keys and array indexes. What this says of a
 * text that is not valid JSON means nothing: parse it too.
 */
export const MAX_JSON_DEPTH = 64;

export interface JsonShape {
  /** The offset of the first bracket that opens level MAX_JSON_DEPTH + 1, or -1. */
  readonly deepAt: number;
  /** With `keys`: the path of the first key given twice, if any. */
  readonly repeated?: (string | number)[];
}

export function jsonShape(text: string, opts: { keys?: boolean } = {}): JsonShape {
  // per open container: its keys (an object, with `keys`) or null (an array, with the index of
  // its element), and where it sits in its parent (a key, an index; the top one: nowhere)
  const open: { keys: Set<string> | null; index: number; at: string | number | undefined }[] = [];
  let lastKey: string | undefined;
  let repeated: (string | number)[] | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = open[open.length - 1];
    if (c === 0x22) {
      // a string: to its closing quote, past escapes
      const start = i;
      let escaped = false;
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) {
          escaped = true;
          i++;
        } else if (d === 0x22) break;
      }
      if (repeated !== undefined || top?.keys == null) continue; // no keys wanted, or a value in an array
      let j = i + 1;
      while (j < text.length && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j++;
      if (text[j] !== ':') continue; // a value
      let key = text.slice(start + 1, i);
      if (escaped) {
        try {
          key = JSON.parse(text.slice(start, i + 1)) as string;
        } catch {
          continue; // a bad escape: invalid JSON, which JSON.parse then names
        }
      }
      if (top.keys.has(key)) repeated = [...open.slice(1).map((o) => o.at!), key];
      else top.keys.add(key);
      lastKey = key;
    } else if (c === 0x7b || c === 0x5b) {
      if (open.length >= MAX_JSON_DEPTH) return { deepAt: i, ...(repeated && { repeated }) };
      const at = top === undefined ? undefined : top.keys === null ? top.index : lastKey;
      open.push({ keys: c === 0x7b && opts.keys === true ? new Set() : null, index: 0, at });
    } else if (c === 0x7d || c === 0x5d) open.pop();
    else if (c === 0x2c && top !== undefined && top.keys === null) top.index++;
  }
  return { deepAt: -1, ...(repeated && { repeated }) };
}
