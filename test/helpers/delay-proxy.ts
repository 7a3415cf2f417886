/**
 * A TCP proxy on loopback that delays every byte by a fixed time in each direction: the slow
 * link between two regions (issue 28: a leased level shared by two Redis deployments through a
 * coordinator 40 ms away, each way). It can also cut the link (a region cut off) and heal it.
 *
 * Each chunk read from one side is written to the other `delayMs` later. Timers of one duration
 * fire in the order they were set (Node keeps them in one list), so each direction keeps its
 * byte order. While cut, the proxy closes every connection it carries and refuses new ones at
 * once (a reset, not a silence: a client's own timeout is what a silent cut would test, and the
 * tests can pause Redis for that).
 */
import net from 'node:net';

export interface DelayProxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number;
  /** Close every connection and refuse new ones until `heal()`. */
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startDelayProxy(target: { host: string; port: number }, delayMs: number): Promise<DelayProxy> {
  const open = new Set<net.Socket>();
  let isCut = false;
  const later = (to: net.Socket, chunk: Buffer) => {
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, delayMs);
  };
  const server = net.createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    open.add(client);
    open.add(upstream);
    client.on('data', (chunk) => later(upstream, chunk));
    upstream.on('data', (chunk) => later(client, chunk));
    // an end travels as late as the data before it
    const close = (s: net.Socket) => {
      open.delete(s);
      setTimeout(() => s.destroy(), delayMs);
    };
    client.on('close', () => close(upstream));
    upstream.on('close', () => close(client));
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  const dropAll = () => {
    for (const s of open) s.destroy();
    open.clear();
  };
  return {
    port,
    cut() {
      isCut = true;
      dropAll();
    },
    heal() {
      isCut = false;
    },
    close() {
      dropAll();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
