import { mkdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A port that was free on 127.0.0.1 a moment ago, for a server (a private etcd) that binds it soon after.
 * Chosen at random below the kernel's ephemeral range: a port the OS handed out (`listen(0)`) lies inside that
 * range, where every outgoing connection on the machine takes its local port, and one of them could take it
 * before the server binds (seen under load: etcd failing with "address already in use"). A port handed out is noted
 * for a while (reserve), so that no other process on the machine gets it before its server binds it (seen: a test's
 * restored member whose peer port another test's etcd took meanwhile).
 */
export async function freePort(): Promise<number> {
  const [ephemeralLow] = await ephemeralRange();
  const low = 10_000;
  const high = Math.max(low + 1_000, ephemeralLow) - 1;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if ((await bindable(port)) && (await reserve(port))) return port;
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

/** Where ports handed out lately are noted, one empty file each, for any process on this machine. */
const RESERVATIONS = join(tmpdir(), 'etcd-steward-ports');
/** How long a port handed out stays noted: longer than any wait between handing it out and binding it. */
const RESERVED_MS = 10 * 60_000;

/** Notes `port` as handed out; false when another process did so lately. Without a place to note it, as before. */
async function reserve(port: number): Promise<boolean> {
  const file = join(RESERVATIONS, String(port));
  try {
    await mkdir(RESERVATIONS, { recursive: true });
    await writeFile(file, '', { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return true;
    const noted = await stat(file).then(
      (s) => s.mtimeMs,
      () => 0,
    );
    if (Date.now() - noted < RESERVED_MS) return false;
    const now = new Date();
    await utimes(file, now, now).catch(() => {});
    return true;
  }
}

let range: Promise<[number, number]> | undefined;

function ephemeralRange(): Promise<[number, number]> {
  range ??= readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .then((text) => text.trim().split(/\s+/).map(Number) as [number, number])
    .catch(() => [32768, 60999] as [number, number]);
  return range;
}
