/**
 * Repeated keys in a configuration file: refused, never "last one wins" (`limit: 5` then
 * `limit: 500000` would silently load 500000). One message shape for JSON and YAML.
 */
import { visit } from 'jsonc-parser';
import { formatPath } from './path.js';

/** 1-based line and column. */
export interface Place {
  line: number;
  column: number;
}

/** `file: inbound.peers.p1[0].limit: duplicate key at line 7, column 9 (first at line 6, column 9)`. */
export function duplicateKeyProblem(source: string, path: readonly PropertyKey[], at: Place, first: Place): string {
  return `${source}: ${formatPath(path)}: duplicate key at line ${at.line}, column ${at.column} (first at line ${first.line}, column ${first.column})`;
}

/**
 * Every repeated key of every object in `text`, which must be valid JSON (JSON.parse keeps the
 * last value of a repeated key and says nothing). Keys are compared decoded: "a" and "\u0061"
 * are the same key. jsonc-parser (Microsoft's JSON scanner, used by VS Code) reports each key
 * with its place and path.
 */
export function jsonDuplicateKeys(text: string, source: string): string[] {
  const problems: string[] = [];
  const objects: Map<string, Place>[] = []; // the keys of each object being read, innermost last
  visit(
    text,
    {
      onObjectBegin: () => void objects.push(new Map()),
      onObjectEnd: () => void objects.pop(),
      onObjectProperty: (key, _offset, _length, line, character, path) => {
        const keys = objects[objects.length - 1]!;
        const at = { line: line + 1, column: character + 1 };
        const first = keys.get(key);
        if (first) problems.push(duplicateKeyProblem(source, [...path(), key], at, first));
        else keys.set(key, at);
      },
    },
    { disallowComments: true },
  );
  return problems;
}
