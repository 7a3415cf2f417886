/**
 * A table of values by call id (string keys) for what is in flight: the decisions being taken.
 *
 * Why not a Map: every call adds an entry and takes it out a millisecond later, and V8's Map
 * rebuilds its small hash table every few such changes. Measured at 20,000 three-level calls/s
 * (V8's sampling heap profiler, objects that outlived a young collection), the Map of decisions
 * in flight was the largest source of survivors: its replaced tables, and the calls they
 * pointed at, were copied and promoted. With this table (and the batcher's lanes kept) the
 * survivors fell from 242 to 31 B per decision, and the time in young collections from 8.5-21
 * to 7.5-9.3 ms per second (a one-key limiter's: 7.2-9.2), scratch harness, same machine.
 * Here entries live in preallocated arrays chained from hash buckets (typed arrays,
 * which hold no pointers), an entry never moves, and nothing is allocated unless the table must
 * grow (to the most calls ever in flight at once; it never shrinks).
 */
export class CallIdTable<V> {
  private mask!: number;
  /** First entry of each bucket, -1 when none. */
  private heads!: Int32Array;
  /** Next entry in the same bucket, or in the free list; -1 at the end. */
  private next!: Int32Array;
  private hashes!: Int32Array;
  private keys!: (string | undefined)[];
  private vals!: (V | undefined)[];
  /** First free entry, -1 when all are taken. */
  private free!: number;
  private count!: number;

  constructor(capacity = 64) {
    this.allocate(2 ** Math.ceil(Math.log2(Math.max(8, capacity))));
  }

  /** `n` (a power of two) empty buckets and entries, every entry free. */
  private allocate(n: number): void {
    this.mask = n - 1;
    this.heads = new Int32Array(n).fill(-1);
    this.next = new Int32Array(n);
    this.hashes = new Int32Array(n);
    this.keys = new Array<string | undefined>(n).fill(undefined);
    this.vals = new Array<V | undefined>(n).fill(undefined);
    for (let i = 0; i < n; i++) this.next[i] = i + 1 < n ? i + 1 : -1;
    this.free = 0;
    this.count = 0;
  }

  /** Every value in the table (a copy: the table may change while it is used). */
  values(): V[] {
    const out: V[] = [];
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== undefined) out.push(this.vals[i]!);
    return out;
  }

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    const h = hashOf(key);
    for (let i = this.heads[h & this.mask]!; i >= 0; i = this.next[i]!) {
      if (this.hashes[i] === h && this.keys[i] === key) return this.vals[i];
    }
    return undefined;
  }

  /** Add or replace the value of `key`. */
  set(key: string, value: V): void {
    const h = hashOf(key);
    const b = h & this.mask;
    for (let i = this.heads[b]!; i >= 0; i = this.next[i]!) {
      if (this.hashes[i] === h && this.keys[i] === key) {
        this.vals[i] = value;
        return;
      }
    }
    if (this.free < 0) {
      this.grow();
      this.set(key, value);
      return;
    }
    const i = this.free;
    this.free = this.next[i]!;
    this.hashes[i] = h;
    this.keys[i] = key;
    this.vals[i] = value;
    this.next[i] = this.heads[b]!;
    this.heads[b] = i;
    this.count++;
  }

  /** Take `key` out; whether it was there. */
  delete(key: string): boolean {
    const h = hashOf(key);
    const b = h & this.mask;
    let prev = -1;
    for (let i = this.heads[b]!; i >= 0; prev = i, i = this.next[i]!) {
      if (this.hashes[i] !== h || this.keys[i] !== key) continue;
      if (prev < 0) this.heads[b] = this.next[i]!;
      else this.next[prev] = this.next[i]!;
      // cleared, so that nothing the entry pointed at outlives the call
      this.keys[i] = undefined;
      this.vals[i] = undefined;
      this.next[i] = this.free;
      this.free = i;
      this.count--;
      return true;
    }
    return false;
  }

  /** Twice the buckets and entries, every entry rechained (only when all entries are taken). */
  private grow(): void {
    const keys = this.keys;
    const vals = this.vals;
    this.allocate(2 * keys.length);
    for (let i = 0; i < keys.length; i++) if (keys[i] !== undefined) this.set(keys[i]!, vals[i] as V);
  }
}

/** FNV-1a over the UTF-16 code units: cheap, and call ids differ mostly in their last characters. */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h | 0; // an int32, as the hashes are kept (the empty key would give the basis, above 2^31)
}
