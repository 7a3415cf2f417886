/**
 * YAML configurations: parsed with the yaml package, then one linear pass over the parsed document
 * before it becomes JavaScript, which
 *
 * - refuses repeated keys, with their path (yaml's own uniqueKeys check compares every key with
 *   every earlier key of its map: 100,000 peers took minutes);
 * - bounds what aliases expand to (MAX_ALIAS_NODES), which refuses alias bombs with their place;
 * - puts each alias's anchored node in its place, so that toJS meets no alias (yaml resolves
 *   each alias by scanning every node before it: 100,000 aliases took minutes too);
 * - refuses an alias inside its own anchor (a recursive structure is no configuration);
 * - names a key by its text as written: YAML reads a plain `00123:` as the number 123 and `+1800:`
 *   as 1800, and JavaScript would name them "123" and "1800", another peer than the file's.
 *
 * yaml's own alias guard (maxAliasCount, default 100) counts alias uses times nesting, not
 * sizes: by default it refuses 101 peers sharing one anchor, and at any setting that admits
 * 100,000 of them it lets a 10,000-limit anchor used 100,000 times through (a billion nodes).
 * The count here is exact, so it replaces it.
 */
import {
  LineCounter,
  isAlias,
  isCollection,
  isPair,
  isScalar,
  isSeq,
  parseDocument,
  type Node as YamlNode,
} from 'yaml';
import { ConfigError } from '../errors/config-error.js';
import { duplicateKeyProblem, type Place } from './duplicate-keys.js';
import { formatPath } from './path.js';

/**
 * The most nodes (scalars and collections) aliases may add to a configuration once expanded:
 * 100,000 peers sharing one anchor of 6 limits add 4.4 M. Past it is an alias bomb ("billion
 * laughs": a few lines of nested aliases expanding to billions of nodes).
 */
export const MAX_ALIAS_NODES = 5_000_000;

/** A document's text parsed, checked and converted; throws ConfigError with every problem found. */
export function parseYamlText(text: string, source: string): unknown {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: true, lineCounter, uniqueKeys: false });
  if (doc.errors.length > 0) {
    const lines = doc.errors.map((err) => {
      const pos = err.linePos?.[0];
      // the library's advice to its callers (parseAllDocuments) means nothing to the file's author
      const reason =
        err.code === 'MULTIPLE_DOCS'
          ? "a second document ('---'): a configuration is one YAML document"
          : (err.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
      return pos
        ? `${source}: invalid YAML at line ${pos.line}, column ${pos.col}: ${reason}`
        : `${source}: invalid YAML: ${reason}`;
    });
    throw new ConfigError([...new Set(lines)], { cause: doc.errors[0] });
  }
  const place = (node: YamlNode | undefined | null): Place => {
    const { line, col } = lineCounter.linePos(node?.range?.[0] ?? 0);
    return { line, column: col };
  };
  const problems = resolveAliases(doc.contents, source, place);
  if (problems.length > 0) throw new ConfigError(problems);
  return doc.toJS();
}

/**
 * The pass described above, over `root` (changed in place: aliases replaced). Returns the
 * problems; an alias bomb ends the pass at once, as its only problem.
 */
function resolveAliases(root: unknown, source: string, place: (node: YamlNode) => Place): string[] {
  const problems: string[] = [];
  // the last node seen with each anchor name, and its size once it is complete
  const anchors = new Map<string, { node: YamlNode; size?: number }>();
  let added = 0;
  const path: PropertyKey[] = [];
  const at = (node: YamlNode) => {
    const p = place(node);
    return `line ${p.line}, column ${p.column}`;
  };

  /** The node to use in place of `node` (an alias's anchored node), and its size once expanded. */
  const visit = (node: unknown): { node: unknown; size: number } => {
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      // yaml's parser reports neither an unknown anchor nor one defined further down (toJS()
      // then threw a ReferenceError with its stack): an alias refers to an anchor above it
      if (!target) {
        problems.push(
          `${source}: ${formatPath(path) || 'top level'}: alias *${node.source} at ${at(node)} has no anchor &${node.source} before it (an anchor must come before its aliases)`,
        );
        return { node, size: 1 };
      }
      if (target.size === undefined) {
        problems.push(
          `${source}: ${formatPath(path) || 'top level'}: alias *${node.source} at ${at(node)} is inside its own anchor (a recursive structure)`,
        );
        return { node, size: 1 };
      }
      added += target.size;
      if (added > MAX_ALIAS_NODES) {
        const limit = MAX_ALIAS_NODES.toLocaleString('en-US');
        throw new AliasBomb(
          `${source}: invalid YAML at ${at(node)}: aliases expand the configuration by more than ${limit} nodes here (an alias bomb?)`,
        );
      }
      return { node: target.node, size: target.size };
    }
    const anchor = (node as YamlNode | null)?.anchor;
    const entry: { node: YamlNode; size?: number } | undefined =
      anchor !== undefined ? { node: node as YamlNode } : undefined;
    if (entry) anchors.set(anchor!, entry);
    let size = 1;
    if (isSeq(node)) {
      for (let i = 0; i < node.items.length; i++) {
        path.push(i);
        const r = visit(node.items[i]);
        path.pop();
        node.items[i] = r.node;
        size += r.size;
      }
    } else if (isCollection(node)) {
      const keys = new Map<string, YamlNode>(); // each key as JavaScript will name it: 1 and "1" are one key
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const keyNode = pair.key as YamlNode;
        const k = visit(keyNode);
        pair.key = k.node;
        // a plain key YAML read as a number, a boolean or null: its text as written is the id
        if (isScalar(k.node) && typeof k.node.value !== 'string' && typeof k.node.source === 'string')
          k.node.value = k.node.source;
        const name = isScalar(k.node) ? String(k.node.value) : String(k.node);
        // a map or a list as a key (`? {a: 1}`) would be named by its text ("{ a: 1 }"): an id
        // nobody meant
        if (k.node !== null && !isScalar(k.node))
          problems.push(
            `${source}: ${formatPath([...path, name])}: a key must be a plain value, not a map or a list (at ${at(keyNode)})`,
          );
        const first = keys.get(name);
        if (first) problems.push(duplicateKeyProblem(source, [...path, name], place(keyNode), place(first)));
        else keys.set(name, keyNode);
        path.push(name);
        const v = visit(pair.value);
        path.pop();
        pair.value = v.node;
        size += k.size + v.size;
      }
    }
    if (entry) entry.size = size;
    return { node, size };
  };

  try {
    visit(root);
  } catch (err) {
    if (err instanceof AliasBomb) return [err.message];
    throw err;
  }
  return problems;
}

class AliasBomb extends Error {}
