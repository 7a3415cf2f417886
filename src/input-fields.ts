/**
 * Refuse the fields a call's input does not have: from JavaScript, a misspelt optional field
 * (`acount`) would otherwise be ignored silently and the call decided without it (the sidecar
 * refuses unknown fields the same way). A for-in over a few keys: cheap enough for every decision.
 */
import { InvalidArgumentError } from './errors/index.js';

export function checkFields(input: object, allowed: ReadonlySet<string>, what: string): void {
  let unknown: string[] | undefined;
  for (const key in input) if (!allowed.has(key)) (unknown ??= []).push(key);
  if (unknown === undefined) return;
  const names = unknown.map((k) => JSON.stringify(k)).join(', ');
  throw new InvalidArgumentError(
    `${what}: unknown field${unknown.length > 1 ? 's' : ''} ${names} (accepted: ${[...allowed].join(', ')})`,
  );
}

/**
 * A value as an error message shows it after "got": JSON for strings, plain objects and arrays;
 * what JSON would misstate by its kind or as JavaScript writes it (NaN and Infinity are not
 * `null`, a Set is not `{}`, a Date is not a string, a function is not its source).
 */
export function show(value: unknown): string {
  switch (typeof value) {
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'bigint':
      return `${value}n`;
    case 'undefined':
    case 'symbol':
      return String(value);
    case 'function':
      return 'a function';
  }
  try {
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        const ctor = (proto as { constructor?: { name?: unknown } }).constructor?.name;
        const name =
          typeof ctor === 'string' && ctor !== '' ? ctor : Object.prototype.toString.call(value).slice(8, -1);
        return `${/^[AEIOU]/.test(name) ? 'an' : 'a'} ${name}`;
      }
    }
    return JSON.stringify(value) ?? String(value);
  } catch {
    return 'an object'; // a cycle, a bigint inside, a revoked Proxy, a getter that throws
  }
}
