/**
 * The lane's side of a leased level, script by script on a real Redis (lua/lease-*.lua): what
 * an observation reads and resets (the calls admitted since the last one read from the log), a
 * shrink never below what the lane's calls use, a grant, the lease end that never moves back,
 * orders of an older term or epoch refused, a newer epoch starting from what the lane's calls
 * use; and the leadership (SET NX, a term per new leader, given up at once).
 */
import { expect } from 'chai';
import { scripts, type ScriptName } from '../src/store/redis/scripts.js';
import { redisRig } from './helpers/redis.js';

const W = 1_000_000;

describe('the lease scripts (lua/lease-*.lua)', function () {
  this.timeout(20_000);
  const rig = redisRig();

  const run = (name: ScriptName, keys: string[], args: (string | number)[]) =>
    rig.raw.call('EVAL', scripts()[name].lua, keys.length, ...keys, ...args.map(String)) as Promise<number[]>;
  const lane = (p: string) => [`${p}{in:0.0}:global:share`, `${p}{in:0.0}:global:log`, `${p}{in:0.0}:global:ch`];
  const redisNow = async () => {
    const [s, us] = await rig.raw.time();
    return Number(s) * 1e6 + Number(us);
  };

  it('observe, grant, shrink: the share never below what the lane uses, the lease end never back', async () => {
    const keys = lane('a:');
    const [share, log, holds] = keys as [string, string, string];
    const first = await run('lease-observe', keys, [1, W, 50_000]);
    // all 0, and emptied: the share hash had no term (never observed)
    expect(first.slice(1, 12)).to.deep.equal([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    const now = first[0]!;
    expect(Math.abs(now - (await redisNow()))).to.be.below(1e6);

    expect(await run('lease-grant', keys, [1, 0, 5, 4, now + 2e6, W])).to.deep.equal([5, 4]);
    // three calls in the window (one of them about to leave it, two admitted since the last
    // observation), two holding channels; x stays in the window 300 ms more, and leaves it
    // before a tick of 600 ms ends (margins for a loaded machine: 10 ms failed once in CI)
    await rig.raw.zadd(log, now - W + 300_000, 'x', now + 1, 'y', now + 2, 'z');
    await rig.raw.zadd(holds, now + 60e6, 'c1', now + 60e6, 'c2', now - 1, 'ended');
    await rig.raw.hset(share, 'rc', 2, 'rh', 1);
    const seen = await run('lease-observe', keys, [1, W, 600_000]);
    // now, in window, leaving before the next tick, in use, admitted since, rc, rh, c, h, e, epoch, emptied
    expect(seen.slice(1, 12)).to.deep.equal([3, 1, 2, 2, 2, 1, 5, 4, now + 2e6, 0, 0]);
    // a reading resets nothing: the refusal counters stand (the coordinator counts their
    // growth), and the calls admitted count from the hash's mark, or from the mark given (the
    // last reading the coordinator received: one whose reply was lost moved the hash's)
    expect((await run('lease-observe', keys, [1, W, 50_000])).slice(4, 7), 'since the last').to.deep.equal([0, 2, 1]);
    expect((await run('lease-observe', keys, [1, W, 50_000, first.at(-1)!]))[4], 'since the mark given').to.equal(2);

    // target 1 call, 0 channels: down to what is used (3 calls, 2 channels); a later lease end
    expect(await run('lease-shrink', keys, [1, 0, 1, 0, now + 3e6, W])).to.deep.equal([3, 2, 2, 2]);
    // a target above the share frees nothing, grows nothing; an earlier lease end is ignored
    expect(await run('lease-shrink', keys, [1, 0, 9, 9, now + 1e6, W])).to.deep.equal([3, 2, 0, 0]);
    expect(Number(await rig.raw.hget(share, 'e'))).to.equal(now + 3e6);
  });

  it("a leased carrier's slots ahead of now: its use is the most in any window, not its whole log", async () => {
    const keys = ['e:{out:x}:carrier:x:share', 'e:{out:x}:carrier:x:slots', 'e:{out:x}:carrier:x:ch'];
    const [, slots] = keys as [string, string];
    const { 0: observed } = await run('lease-observe', keys, [1, W, 50_000]);
    expect(await run('lease-grant', keys, [1, 0, 9, 0, observed! + 5e6, W])).to.deep.equal([9, 0]);
    // slots a pacer gave, three of them ahead (the scripts run within 50 ms of t): six after
    // t - W, but no window (u - W, u] ending at or after now holds more than four (u = t + 250)
    const t = await redisNow();
    // (the newest a fractional µs, as a carrier of 3 CPS gives them)
    const at = [-900, -850, -100, 150, 200, 250].map((ms) => t + ms * 1000);
    at[5] = at[5]! + 0.5;
    await rig.raw.zadd(slots, ...at.flatMap((s) => [s, String(s)]));
    // in use 4; leaving before a 700 ms horizon: its rule, from its newest slot on, will then
    // count the log after t + 250 - 1000 + 700 = t - 50 ms, 3 slots: one of the 4 has left
    const seen = await run('lease-observe', keys, [1, W, 700_000]);
    expect(seen.slice(1, 3)).to.deep.equal([4, 1]);
    // its mark is that newest slot, exactly: read again from it, no slot counts twice
    expect(String(seen[12])).to.equal(String(at[5]));
    expect((await run('lease-observe', keys, [1, W, 700_000, seen[12]!]))[4], 'admitted since').to.equal(0);
    // a shrink comes down to those 4, not to the 6 of the log
    expect((await run('lease-shrink', keys, [1, 0, 0, 0, observed! + 5e6, W])).slice(0, 1)).to.deep.equal([4]);
  });

  it('an older term or epoch is refused; a newer epoch waits for the lease to end, then keeps what the calls use', async () => {
    const keys = lane('b:');
    const { 0: now } = await run('lease-observe', keys, [3, W, 50_000]);
    expect(await run('lease-grant', keys, [3, 0, 10, 10, now! + 50_000, W])).to.deep.equal([10, 10]);
    // a former leader's orders (term 2), late: refused, with the term the lane saw
    expect(await run('lease-grant', keys, [2, 0, 10, 10, now! + 9e6, W])).to.deep.equal([-1, 3]);
    expect(await run('lease-shrink', keys, [2, 0, 0, 0, now! + 9e6, W])).to.deep.equal([-1, 3]);
    expect(await run('lease-observe', keys, [2, W, 50_000])).to.deep.equal([-1, 3]);
    // the lane was lost (epoch 1): while its lease runs it may be admitting on its old share
    expect(await run('lease-grant', keys, [3, 1, 4, 1, now! + 1e6, W])).to.deep.equal([-2]);
    await new Promise((r) => setTimeout(r, 60));
    // its lease over, epoch 1 starts from what its calls use (none here); epoch 0 is refused
    const t = await redisNow();
    expect(await run('lease-grant', keys, [3, 1, 4, 1, t + 1e6, W])).to.deep.equal([4, 1]);
    expect(await run('lease-grant', keys, [3, 0, 4, 1, t + 1e6, W])).to.deep.equal([-1, 3]);
    expect(await run('lease-shrink', keys, [3, 2, 9, 9, t + 1e6, W])).to.deep.equal([-2]);
    // a lane with two calls in its window and one holding a channel, no lease: a new epoch
    // keeps just those
    const other = lane('c:');
    const [, log, holds] = other as [string, string, string];
    await run('lease-observe', other, [3, W, 50_000]);
    await rig.raw.zadd(log, t - 1000, 'p', t - 500, 'q');
    await rig.raw.zadd(holds, t + 60e6, 'p');
    expect(await run('lease-grant', other, [3, 1, 1, 0, t + 1e6, W])).to.deep.equal([3, 1]);
  });

  it('an order to a lane whose share hash is gone (its Redis lost it) is refused; an observation says it was emptied', async () => {
    const keys = lane('d:');
    const { 0: now } = await run('lease-observe', keys, [1, W, 50_000]);
    expect(await run('lease-grant', keys, [1, 0, 5, 5, now! + 1e6, W])).to.deep.equal([5, 5]);
    expect((await run('lease-observe', keys, [1, W, 50_000]))[11], 'emptied').to.equal(0);
    await rig.raw.del(keys[0]!); // as after a restart: no term, no share, no lease end
    expect(await run('lease-grant', keys, [1, 0, 5, 5, now! + 1e6, W])).to.deep.equal([-3]);
    expect(await run('lease-shrink', keys, [1, 0, 0, 0, now! + 1e6, W])).to.deep.equal([-3]);
    expect((await run('lease-observe', keys, [1, W, 50_000]))[11], 'emptied').to.equal(1);
  });

  it('leadership: the first takes it with term 1, renews and saves; another waits; given up, the next takes term 2; never a term back', async () => {
    const keys = ['l:{lease:global}:leader', 'l:{lease:global}:term', 'l:{lease:global}:state'];
    expect(await run('lease-leader', keys, ['a', 1000, ''])).to.deep.equal([2, 1, '']);
    expect(await run('lease-leader', keys, ['b', 1000, ''])).to.deep.equal([0]);
    expect(await run('lease-leader', keys, ['a', 1000, '{"s":1}'])).to.deep.equal([1, 1]);
    expect(await run('lease-leader', keys, ['b', 1000, '{"s":2}'])).to.deep.equal([0]);
    expect(await rig.raw.get(keys[2]!)).to.equal('{"s":1}');
    expect(await run('lease-leader', keys, ['b', '0', ''])).to.deep.equal([0]); // not b's to give up
    expect(await run('lease-leader', keys, ['a', '0', ''])).to.deep.equal([0]);
    expect(await run('lease-leader', keys, ['b', 1000, ''])).to.deep.equal([2, 2, '{"s":1}']);
    // the counter lost with its Redis: a candidate told of term 5 (a lane's) counts past it
    await rig.raw.del(keys[0]!, keys[1]!);
    expect(await run('lease-leader', keys, ['c', 1000, '', '5'])).to.deep.equal([2, 6, '{"s":1}']);
    // one that gives up after seeing term 9 leaves the counter there for the next
    expect(await run('lease-leader', keys, ['c', '0', '', '9'])).to.deep.equal([0]);
    expect(await run('lease-leader', keys, ['d', 1000, ''])).to.deep.equal([2, 10, '{"s":1}']);
  });
});
