/**
 * A TCP proxy standing for a failover's moving address (a Sentinel-managed VIP, a DNS switch):
 * clients connect to the proxy, which pipes each connection to the current backend; switching
 * the backend drops every open connection, as a failover does, and new ones reach the new one.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface Proxy {
  readonly url: string;
  /** Send new connections to `port` and drop the open ones. */
  switchTo(port: number): void;
  close(): Promise<void>;
}

export async function startProxy(backendPort: number, host = '127.0.0.1'): Promise<Proxy> {
  let backend = backendPort;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host, port: backend });
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://${host}:${port}`,
    switchTo(p) {
      backend = p;
      for (const s of [...open]) s.destroy();
      open.clear();
    },
    close() {
      for (const s of [...open]) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
