/**
 * The values an attribute level refused most in a replay (docs/attributes.md): per level, a count
 * of refusals per value, bounded: past MAX_TRACKED values the map keeps its TOP_KEPT largest
 * (a scanner cycling through a million caller numbers does not grow the replay's memory). Counts
 * are exact until a level refuses more than MAX_TRACKED distinct values; after a prune a value
 * dropped and seen again counts from 0 (a lower bound), which cannot hide a value refused often.
 */
export const MAX_TRACKED = 10_000;
export const TOP_KEPT = 1_000;

export interface ValueCounts {
  rejected: number;
  banned: number;
}

export class TopValues {
  /** Per level name, per value. */
  readonly levels = new Map<string, Map<string, ValueCounts>>();
  /** Per level name: every refusal it named, and those by a ban. */
  readonly totals = new Map<string, ValueCounts>();
  pruned = false;

  add(level: string, value: string, banned: boolean): void {
    let m = this.levels.get(level);
    if (m === undefined) {
      m = new Map();
      this.levels.set(level, m);
      this.totals.set(level, { rejected: 0, banned: 0 });
    }
    const total = this.totals.get(level)!;
    total.rejected++;
    if (banned) total.banned++;
    let c = m.get(value);
    if (c === undefined) {
      if (m.size >= MAX_TRACKED) this.prune(m);
      c = { rejected: 0, banned: 0 };
      m.set(value, c);
    }
    c.rejected++;
    if (banned) c.banned++;
  }

  private prune(m: Map<string, ValueCounts>): void {
    const keep = [...m].sort((a, b) => b[1].rejected - a[1].rejected).slice(0, TOP_KEPT);
    m.clear();
    for (const [k, v] of keep) m.set(k, v);
    this.pruned = true;
  }

  /** The `n` values refused most per level, most first (ties by value). */
  top(n: number): { level: string; rejected: number; banned: number; values: ({ value: string } & ValueCounts)[] }[] {
    return [...this.levels].map(([level, m]) => ({
      level,
      ...this.totals.get(level)!,
      values: [...m]
        .sort((a, b) => b[1].rejected - a[1].rejected || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
        .slice(0, n)
        .map(([value, c]) => ({ value, ...c })),
    }));
  }
}
