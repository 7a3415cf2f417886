/**
 * What this process knows of the sliding logs its admits on Redis TIME wrote: per bucket (with
 * its limits), the bound at which its log was then trimmed (or found trimmed), which also says
 * that the log's expiry was set for these limits. The admit scripts get it with every call, and
 * skip a trim that would remove nothing and the PEXPIRE while it holds (lua/includes/log.lua,
 * logWrite).
 */
import { num, trimBound, type BucketArgs } from './bucket-args.js';

export class KnownLogs {
  /** Weak: the arguments of a dropped plan cost nothing. */
  private bounds = new WeakMap<BucketArgs, number>();

  /** The bound of the latest trim of the bucket's log this process knows of, '' when none. */
  boundOf(args: BucketArgs): string {
    const bound = this.bounds.get(args);
    return bound === undefined ? '' : num(bound);
  }

  /** A call admitted on Redis TIME at `now`: its logs have their expiry and were trimmed at the bound of that time. */
  admitted(buckets: readonly BucketArgs[], now: number): void {
    for (const args of buckets)
      if (args.retention > 0) this.bounds.set(args, trimBound(now, args.retention, args.retentionLimit));
  }

  /**
   * What the process knows holds for the server it saw write the logs; a connection lost may mean
   * a failover to a replica that missed the latest trims, or a restart from an older copy: the
   * next write of each log trims it and sets its expiry again.
   */
  forget(): void {
    this.bounds = new WeakMap();
  }
}
