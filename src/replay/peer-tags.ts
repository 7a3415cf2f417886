/**
 * A trace replayed on a store whose keys carry hash tags (a Redis Cluster): each inbound call's
 * keys live on its plan's tag, its account's when the account is configured (and no global
 * level puts every call on one), else its peer's. A peer named with two configured accounts, or
 * with one and without, would then be counted apart under each tag, each half alone: decisions
 * the contract makes otherwise (docs/redis.md, "Hash tags and Cluster"). Seen while the trace is
 * validated, so that such a replay stops before its first decision rather than print others.
 */
import { planFor, UNKNOWN_PEER } from '../admission/plan.js';
import type { CallGateConfig } from '../config/types.js';
import type { TraceProblem } from '../errors/trace-error.js';
import type { TraceCall } from './trace.js';

export class PeerTagCheck {
  /** Per peer: the tag of its first call, and where that call is. */
  private readonly first = new Map<string, { tag: string; line: number; account: string | undefined }>();
  /** The first peer found on two tags, if any. */
  problem?: TraceProblem;

  constructor(
    private readonly config: CallGateConfig,
    private readonly file: string,
  ) {}

  readonly see = (call: TraceCall): void => {
    if (this.problem !== undefined || call.direction !== 'in') return;
    const peer = call.peer!;
    const plan = planFor(this.config, peer, call.account);
    if (plan === UNKNOWN_PEER) return; // refused before any key
    const seen = this.first.get(peer);
    if (seen === undefined) {
      this.first.set(peer, { tag: plan.tag, line: call.line, account: this.configured(call.account) });
      return;
    }
    if (seen.tag === plan.tag) return;
    this.problem = {
      file: this.file,
      line: call.line,
      message:
        `peer ${JSON.stringify(peer)} comes with ${this.named(this.configured(call.account))} here and with ` +
        `${this.named(seen.account)} at line ${seen.line}: on a Redis Cluster, without a global level, a peer's ` +
        `limits are counted under its account's hash tag, apart for each (docs/redis.md, "Hash tags and Cluster"); ` +
        'replay this trace on the memory store or a single Redis',
    };
  };

  /** The call's account when the configuration has it (an account it lacks adds no level). */
  private configured(account: string | undefined): string | undefined {
    return account !== undefined && account !== '' && this.config.inbound.accounts.has(account) ? account : undefined;
  }

  private named(account: string | undefined): string {
    return account === undefined ? 'no configured account' : `account ${JSON.stringify(account)}`;
  }
}
