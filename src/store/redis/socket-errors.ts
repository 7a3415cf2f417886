/**
 * Every socket of a store's client keeps an 'error' listener. ioredis listens to a socket's
 * 'error' once (redis/ioredis#1183; the fix, #961, was declined), and a TLS socket can fail twice:
 * a write reset, then the server's alert read from the same socket (a client certificate refused
 * after a TLS 1.3 handshake, a load balancer's hang-up). The second error then had no listener:
 * an uncaught exception, which ends the routing process. ioredis still sees the first error and
 * reconnects; what follows on a socket it has given up is ignored.
 */
import type { Cluster, Redis } from 'ioredis';

type Stream = Redis['stream'];

const guarded = new WeakSet<object>();
const ignore = (): void => {};

function guardStream(stream: Stream | undefined): void {
  if (!stream || guarded.has(stream)) return;
  guarded.add(stream);
  stream.on('error', ignore);
}

/**
 * Guard each socket a client opens from now on: ioredis assigns a new socket to `redis.stream`
 * before it listens to it, and before the socket can emit anything (it emits asynchronously).
 */
function guardClient(redis: Redis): void {
  if (guarded.has(redis)) return;
  guarded.add(redis);
  let current = redis.stream;
  guardStream(current);
  Object.defineProperty(redis, 'stream', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (stream: Stream) => {
      current = stream;
      guardStream(stream);
    },
  });
}

/** A client, or each node client of a Cluster (those it has and those it will connect to). */
export function guardSocketErrors(client: Redis | Cluster, cluster: boolean): void {
  if (!cluster) {
    guardClient(client as Redis);
    return;
  }
  const c = client as Cluster;
  if (guarded.has(c)) return;
  guarded.add(c);
  for (const node of c.nodes('all')) guardClient(node);
  c.on('+node', guardClient);
}
