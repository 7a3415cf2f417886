/**
 * Carrier lanes: with hash tags each carrier lives on a tag (shard) of its own, and a reservation
 * over a route tries its carriers one script call at a time (RedisStore.reserve). For its
 * decisions to be those of the calls applied one by one in issue order (as on one Redis, and as
 * the MemoryStore decides), every carrier must see the steps that reach it in issue order: a call
 * passed over by its first carrier reaches the second one before any call issued after it.
 *
 * So at issue time a call puts one step in the lane of each carrier of its route (and of each
 * carrier where an earlier reservation of its id may hold a record, to drop it): the first step
 * ready, the others waiting for the outcome of the one before. A lane runs its steps in order,
 * and stops at the first step still waiting; a step that turns out not to be needed (an earlier
 * carrier took the call) is dropped. Running a step hands its script call to the batcher (or
 * sends it), so the steps of a lane leave on one connection in issue order.
 *
 * The price: a lane whose head waits for a call's answer on another shard waits one round trip
 * for it, the calls behind it with it (they leave together then, as one batch).
 */

/** One step of a lane. */
export interface Step {
  readonly tag: string;
  state: 'waiting' | 'ready' | 'dropped' | 'done';
  go: () => void;
}

export class CarrierLanes {
  private readonly lanes = new Map<string, Step[]>();

  /** Queue a step on `tag`'s lane (ready: may run as soon as the steps before it ran). */
  add(tag: string, go: () => void, ready: boolean): Step {
    const step: Step = { tag, state: ready ? 'ready' : 'waiting', go };
    let lane = this.lanes.get(tag);
    if (lane === undefined) this.lanes.set(tag, (lane = []));
    lane.push(step);
    if (ready && lane.length === 1) this.drain(tag);
    return step;
  }

  /** A waiting step may run now (with `go`, when given). */
  ready(step: Step, go?: () => void): void {
    if (step.state !== 'waiting') return;
    if (go !== undefined) step.go = go;
    step.state = 'ready';
    this.drain(step.tag);
  }

  /** A waiting step is not needed. */
  drop(step: Step): void {
    if (step.state !== 'waiting') return;
    step.state = 'dropped';
    this.drain(step.tag);
  }

  /** Steps not yet run or dropped, on every lane (diagnostics). */
  get pending(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.length;
    return n;
  }

  private drain(tag: string): void {
    const lane = this.lanes.get(tag);
    if (lane === undefined) return;
    while (lane.length > 0 && lane[0]!.state !== 'waiting') {
      const step = lane.shift()!;
      if (step.state === 'ready') {
        step.state = 'done';
        step.go();
      }
    }
    if (lane.length === 0) this.lanes.delete(tag);
  }
}
