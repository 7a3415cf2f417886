/**
 * How deep a JSON text nests, read before it is parsed: JSON.parse takes thousands of levels,
 * but what walks the value after it (a reviver, jsonc-parser's visitor for repeated keys, a
 * validator) recurses once per level, and a few kilobytes of `[[[[…` overflowed the stack: a
 * stack trace on the command line, a 500 from the sidecar. No configuration or request nests
 * anywhere near this bound.
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
