import { request } from 'node:http';
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
    server = new HttpServer({ host: '127.0.0.1', port: 0 }, [echo, failing], () => health, context());
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
    expect([400, 404]).toContain(status);
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

describe('LeaderForward', () => {
  let leaderServer: HttpServer;
  let port: number;

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
    leaderServer = new HttpServer({ host: '127.0.0.1', port }, [full], () => true, context());
    await leaderServer.start();
  });

  afterAll(async () => {
    await leaderServer.stop();
  });

  const leadership = (client: string | undefined) => ({ leaderClientUrl: async () => client }) as unknown as Leadership;
  const incoming = (headers: Record<string, string> = {}) => ({ method: 'POST', headers }) as never;

  it("passes a follower's request to the leader's sidecar: the leader's host, this server's port", async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), { serverPort: port, tls: false });
    const answer = await forward.forward(incoming(), '/snapshot/full?final=true');
    expect(answer.status).toBe(200);
    expect(JSON.parse(String(answer.body))).toEqual({ method: 'POST', final: 'true', authorization: null });
  });

  it("passes the caller's token on: the leader's sidecar decides as it would for a direct request", async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), { serverPort: port, tls: false });
    const answer = await forward.forward(incoming({ authorization: 'Bearer t0ken' }), '/snapshot/full');
    expect(JSON.parse(String(answer.body))).toMatchObject({ authorization: 'Bearer t0ken' });
  });

  it('never passes a request on twice, and says where the leader is when it cannot forward', async () => {
    const forward = new LeaderForward(leadership('http://127.0.0.1:2379'), { serverPort: port, tls: false });
    const again = await forward.forward(incoming({ 'x-etcd-steward-forwarded': '1' }), '/snapshot/full');
    expect(again).toMatchObject({ status: 503, body: { leader: `http://127.0.0.1:${port}` } });
    const unknown = await new LeaderForward(leadership(undefined), { serverPort: port, tls: false }).forward(
      incoming(),
      '/x',
    );
    expect(unknown).toMatchObject({ status: 503, body: { error: expect.stringMatching(/leader is not known/) } });
    const down = await new LeaderForward(leadership('http://127.0.0.1:2379'), {
      serverPort: await freePort(),
      tls: false,
    }).forward(incoming(), '/snapshot/full');
    expect(down).toMatchObject({
      status: 503,
      body: { error: expect.stringMatching(/forwarding to the leader failed/) },
    });
  });
});
