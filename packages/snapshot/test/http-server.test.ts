import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { freePort, silentLogger } from '@etcd-steward/core';
import { HttpServer, LeaderForward, type Leadership, type Route } from '@etcd-steward/snapshot';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const context = () => ({ registry: new Registry(), logger: silentLogger });

describe('HttpServer', () => {
  let server: HttpServer;
  let url: string;
  let health = true;
  const echo: Route = {
    path: '/echo',
    methods: ['GET', 'POST'],
    query: ['a'],
    handle: async (_req, query) => ({ status: 200, body: { a: query.get('a') } }),
  };
  const failing: Route = {
    path: '/boom',
    methods: ['GET'],
    handle: async () => {
      throw new Error('it broke');
    },
  };

  beforeAll(async () => {
    server = new HttpServer(
      { host: '127.0.0.1', port: 0, maxConnections: 100 },
      [echo, failing],
      () => health,
      context(),
    );
    await server.start();
    url = `http://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server.stop();
  });

  it('answers routes, and checks path, method, query and body before anything runs', async () => {
    expect(await (await fetch(`${url}/echo?a=1`)).json()).toEqual({ a: '1' });
    expect((await fetch(`${url}/echo`, { method: 'POST' })).status).toBe(200);
    const notAllowed = await fetch(`${url}/echo`, { method: 'PUT' });
    expect(notAllowed.status).toBe(405);
    expect(notAllowed.headers.get('allow')).toBe('GET, POST');
    expect((await fetch(`${url}/echo?b=1`)).status).toBe(400);
    expect((await fetch(`${url}/echo/`)).status).toBe(404);
    expect((await fetch(`${url}/echo`, { method: 'POST', body: 'x'.repeat(100_000) })).status).toBe(413);
    const boom = await fetch(`${url}/boom`);
    expect(boom.status).toBe(500);
    expect(await boom.json()).toEqual({ error: 'it broke' });
    // a request target that is not a path at all
    const status = await new Promise<number>((resolve) =>
      request(url, { path: '*', method: 'OPTIONS' }, (res) => resolve(res.statusCode ?? 0)).end(),
    );
    expect(status).toBe(404);
  });

  it('serves /healthz as ebr ({"health": bool}, 200 or 503) and /metrics as Prometheus text', async () => {
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ health: true });
    health = false;
    const sick = await fetch(`${url}/healthz`);
    expect(sick.status).toBe(503);
    expect(await sick.json()).toEqual({ health: false });
    health = true;
    const metrics = await fetch(`${url}/metrics`);
    expect(metrics.headers.get('content-type')).toMatch(/text\/plain/);
  });
});

/** A GET on a connection of its own (no keep-alive pool): its status and Retry-After. */
function getAlone(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; retryAfter?: string }>((resolve, reject) =>
    request(url, { agent: false, headers }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] });
    })
      .on('error', reject)
      .end(),
  );
}

describe('HttpServer with a token', () => {
  let server: HttpServer;
  let url: string;
  const ok = async () => ({ status: 200 });
  // Routes as a component would declare them: one says nothing about protection, one says it is open.
  const routes: Route[] = [
    { path: '/new', methods: ['GET'], handle: ok },
    { path: '/read-only', methods: ['GET'], open: true, handle: ok },
  ];

  beforeAll(async () => {
    const options = { host: '127.0.0.1', port: 0, maxConnections: 100, token: Buffer.from('t0ken') };
    server = new HttpServer(options, routes, () => true, context());
    await server.start();
    url = `http://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server.stop();
  });

  it('asks for it on every route not declared open, so that a new route is never left open by omission', async () => {
    expect((await fetch(`${url}/new`)).status).toBe(401);
    expect((await fetch(`${url}/new`, { headers: { authorization: 'Bearer t0ken' } })).status).toBe(200);
    for (const path of ['/read-only', '/healthz', '/metrics']) expect((await fetch(`${url}${path}`)).status).toBe(200);
  });
});

describe('HttpServer past its connections', () => {
  let server: HttpServer;
  let url: string;
  const idle: Socket[] = [];

  beforeAll(async () => {
    const ok = async () => ({ status: 200 });
    server = new HttpServer(
      { host: '127.0.0.1', port: 0, maxConnections: 2, headersTimeoutMs: 1500 },
      [{ path: '/work', methods: ['GET'], handle: ok }],
      () => true,
      context(),
    );
    await server.start();
    url = `http://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    for (const socket of idle) socket.destroy();
    await server.stop();
  });

  it('answers 503 with Retry-After past the cap, /healthz still, and serves again once connections close', async () => {
    for (let i = 0; i < 2; i++) {
      const socket = connect(server.port, '127.0.0.1');
      await once(socket, 'connect');
      idle.push(socket);
    }
    expect(await getAlone(`${url}/work`)).toEqual({ status: 503, retryAfter: '5' });
    expect(await getAlone(`${url}/healthz`)).toEqual({ status: 200 });
    for (const socket of idle.splice(0)) socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await getAlone(`${url}/work`)).toEqual({ status: 200 });
  });

  it('closes a connection that sends no request in time, so that silent ones cannot hold the cap', async () => {
    const started = Date.now();
    const silent = connect(server.port, '127.0.0.1');
    idle.push(silent);
    await once(silent, 'close');
    expect(Date.now() - started).toBeLessThan(5_000);
    // One that sends a request on time is served.
    expect(await getAlone(`${url}/work`)).toEqual({ status: 200 });
  });
});

describe('LeaderForward', () => {
  let leaderServer: HttpServer;
  let port: number;
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });

  beforeAll(async () => {
    port = await freePort();
    const full: Route = {
      path: '/snapshot/full',
      methods: ['GET', 'POST'],
      query: ['final'],
      handle: async (req, query) => ({
        status: 200,
        body: { method: req.method, final: query.get('final'), authorization: req.headers.authorization ?? null },
      }),
    };
    const limited: Route = {
      path: '/limited',
      methods: ['GET', 'POST'],
      handle: async () => ({ status: 429, body: { error: 'later' }, headers: { 'retry-after': '17' } }),
    };
    // Answers once the test releases it, as a leader taking a full snapshot does.
    const slow: Route = {
      path: '/slow',
      methods: ['GET', 'POST'],
      handle: async () => {
        await released;
        return { status: 200 };
      },
    };
    leaderServer = new HttpServer(
      { host: '127.0.0.1', port, maxConnections: 100 },
      [full, slow, limited],
      () => true,
      context(),
    );
    await leaderServer.start();
  });

  afterAll(async () => {
    await leaderServer.stop();
  });

  const leadership = (client: string | undefined) => ({ leaderClientUrl: async () => client }) as unknown as Leadership;
  const incoming = (headers: Record<string, string> = {}) => ({ method: 'POST', headers }) as never;

  it("passes a follower's request to the leader's sidecar: the leader's host, this server's port", async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: port,
      tls: false,
      maxInFlight: 8,
    });
    const answer = await forward.forward(incoming(), '/snapshot/full?final=true');
    expect(answer.status).toBe(200);
    expect(JSON.parse(String(answer.body))).toEqual({ method: 'POST', final: 'true', authorization: null });
  });

  it("passes the caller's token on: the leader's sidecar decides as it would for a direct request", async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: port,
      tls: false,
      maxInFlight: 8,
    });
    const answer = await forward.forward(incoming({ authorization: 'Bearer t0ken' }), '/snapshot/full');
    expect(JSON.parse(String(answer.body))).toMatchObject({ authorization: 'Bearer t0ken' });
  });

  it('passes at most maxInFlight requests on at once; past it, 503 with Retry-After at once', async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: port,
      tls: false,
      maxInFlight: 2,
    });
    const held = [forward.forward(incoming(), '/slow'), forward.forward(incoming(), '/slow')];
    await new Promise((resolve) => setTimeout(resolve, 100));
    const refused = await forward.forward(incoming(), '/snapshot/full');
    expect(refused).toEqual({
      status: 503,
      body: { error: expect.stringMatching(/already passes 2 requests on to the leader/), leader: expect.any(String) },
      headers: { 'retry-after': '5' },
    });
    release();
    expect((await Promise.all(held)).map((answer) => answer.status)).toEqual([200, 200]);
    expect((await forward.forward(incoming(), '/snapshot/full')).status).toBe(200);
  });

  it("passes the leader's Retry-After on with its answer", async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: port,
      tls: false,
      maxInFlight: 8,
    });
    const answer = await forward.forward(incoming(), '/limited');
    expect(answer).toMatchObject({ status: 429, headers: { 'retry-after': '17' } });
    expect(JSON.parse(String(answer.body))).toEqual({ error: 'later' });
  });

  it('never passes a request on twice, and says where the leader is when it cannot forward', async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: port,
      tls: false,
      maxInFlight: 8,
    });
    const again = await forward.forward(incoming({ 'x-etcd-steward-forwarded': '1' }), '/snapshot/full');
    expect(again).toMatchObject({ status: 503, body: { leader: `http://127.0.0.1:${port}` } });
    const unknown = await new LeaderForward(leadership(undefined), {
      serverPort: port,
      tls: false,
      maxInFlight: 8,
    }).forward(incoming(), '/x');
    expect(unknown).toMatchObject({ status: 503, body: { error: expect.stringMatching(/leader is not known/) } });
    const down = await new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: await freePort(),
      tls: false,
      maxInFlight: 8,
    }).forward(incoming(), '/snapshot/full');
    expect(down).toMatchObject({
      status: 503,
      body: { error: expect.stringMatching(/forwarding to the leader failed/) },
    });
  });
});
