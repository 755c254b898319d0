import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';

/**
 * A port that was free on 127.0.0.1 a moment ago, for a server (a private etcd) that binds it soon after.
 * Chosen at random below the kernel's ephemeral range: a port the OS handed out (`listen(0)`) lies inside that
 * range, where every outgoing connection on the machine takes its local port, and one of them could take it
 * before the server binds (seen under load: etcd failing with "address already in use").
 */
export async function freePort(): Promise<number> {
  const [ephemeralLow] = await ephemeralRange();
  const low = 10_000;
  const high = Math.max(low + 1_000, ephemeralLow) - 1;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (await bindable(port)) return port;
  }
  return bindable(0);
}

/** The port bound (the one asked for, or the OS's pick for 0), or 0 when it could not be bound. */
function bindable(port: number): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.on('error', () => resolve(0));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(bound));
    });
  });
}

let range: Promise<[number, number]> | undefined;

function ephemeralRange(): Promise<[number, number]> {
  range ??= readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .then((text) => text.trim().split(/\s+/).map(Number) as [number, number])
    .catch(() => [32768, 60999] as [number, number]);
  return range;
}
