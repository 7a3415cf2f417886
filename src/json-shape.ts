/**
 * The shape of a JSON text, read beside JSON.parse.
 *
 * How deep it nests, read before it is parsed: JSON.parse takes thousands of levels, but what
 * walks the value after it (a reviver, jsonc-parser's visitor for repeated keys, a validator)
 * recurses once per level, and a few kilobytes of `[[[[…` overflowed the stack: a stack trace on
 * the command line, a 500 from the sidecar. No configuration or request nests anywhere near
 * this bound.
 */
export const MAX_JSON_DEPTH = 64;

/** The offset of the first bracket that opens level MAX_JSON_DEPTH + 1, or -1 (strings skipped). */
export function tooDeepAt(text: string, max = MAX_JSON_DEPTH): number {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string: to its closing quote, past escapes
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return i;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return -1;
}

/**
 * The path of the first key given twice in one object of a JSON text (JSON.parse keeps the last
 * and says nothing), keys and array indexes, or undefined. One pass, for the sidecar's small
 * bodies (jsonc-parser's visitor, which the configuration's files use for their line numbers,
 * costs ten times JSON.parse on a body). Keys compare decoded ("a" and "\u0061" are one key).
 * The text must be valid JSON.
 */
export function firstRepeatedKey(text: string): (string | number)[] | undefined {
  // per open container: its keys (an object) or null (an array, with the index of its element),
  // and where it sits in its parent (a key, an index; the top one: nowhere)
  const open: { keys: Set<string> | null; index: number; at: string | number | undefined }[] = [];
  let lastKey: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = open[open.length - 1];
    if (c === 0x22) {
      const start = i;
      let escaped = false;
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) {
          escaped = true;
          i++;
        } else if (d === 0x22) break;
      }
      if (top?.keys == null) continue; // a value in an array, or the text is a string
      let j = i + 1;
      while (j < text.length && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j++;
      if (text[j] !== ':') continue; // a value
      const key = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
      if (top.keys.has(key)) return [...open.slice(1).map((o) => o.at!), key];
      top.keys.add(key);
      lastKey = key;
    } else if (c === 0x7b || c === 0x5b) {
      const at = top === undefined ? undefined : top.keys === null ? top.index : lastKey;
      open.push({ keys: c === 0x7b ? new Set() : null, index: 0, at });
    } else if (c === 0x7d || c === 0x5d) open.pop();
    else if (c === 0x2c && top !== undefined && top.keys === null) top.index++;
  }
  return undefined;
}
