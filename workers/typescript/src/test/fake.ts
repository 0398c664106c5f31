/** A fake Leasehold API on node:http for the worker's tests: records every request, answers by script. */
import { createServer, Server } from "node:http";
import { AddressInfo } from "node:net";

export interface Recorded { path: string; body: any; at: number }
export type Answer = { status?: number; body: unknown; delayMs?: number; headers?: Record<string, string> };
export type Script = (path: string, body: any, server: FakeServer) => Answer | Promise<Answer>;

export class FakeServer {
  readonly requests: Recorded[] = [];
  private server?: Server;
  private waiters: Array<() => void> = [];
  url = "";

  constructor(private readonly script: Script) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let raw = "";
      req.on("data", (chunk) => (raw += chunk));
      req.on("end", async () => {
        const body = raw ? JSON.parse(raw) : null;
        this.requests.push({ path: req.url ?? "", body, at: Date.now() });
        this.waiters.splice(0).forEach((w) => w());
        const answer = await this.script(req.url ?? "", body, this);
        if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
        res.writeHead(answer.status ?? 200, { "content-type": "application/json", ...answer.headers });
        res.end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }

  named(suffix: string): Recorded[] {
    return this.requests.filter((r) => r.path.endsWith(suffix));
  }

  /** Resolves once `predicate` holds over the requests seen (checked on each request). */
  async until(predicate: (s: FakeServer) => boolean, timeoutMs = 5000): Promise<void> {
    const ends = Date.now() + timeoutMs;
    while (!predicate(this)) {
      if (Date.now() > ends) throw new Error(`timed out; requests: ${JSON.stringify(this.requests.map((r) => r.path))}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }
}

export function leasedJob(id: string, task: string, payload: unknown, leaseMs = 30_000, attempt = 1) {
  return {
    job_id: id, task, payload, attempt, tenant: "t1", deadline_at: null,
    lease: { token: `tok-${id}-${attempt}`, expires_at: new Date(Date.now() + leaseMs).toISOString() },
  };
}

/** Hands out `jobs` on the first lease request, then answers empty after the long poll (capped). */
export function onceThenEmpty(jobs: unknown[], emptyDelayMs = 100) {
  let given = false;
  return (body: any): Answer => {
    if (!given) {
      given = true;
      return { body: { jobs } };
    }
    return { body: { jobs: [] }, delayMs: Math.min(emptyDelayMs, body.wait_seconds * 1000) };
  };
}
