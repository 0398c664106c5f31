/**
 * leasehold-worker: a Leasehold worker for Node 20 over the HTTP lease protocol.
 *
 *   const worker = new Worker({ url: "http://127.0.0.1:8080", pool: "images" });
 *   worker.task("resize", async (payload, ctx) => { ... return { ok: true }; });
 *   await worker.run();   // until SIGTERM: stops leasing, in-flight jobs finish, then resolves
 *
 * The protocol is docs/protocol.md (version 1). Each leased job heartbeats in the background at
 * about a third of what is left of its lease. A heartbeat answering `cancel_requested` aborts
 * `ctx.signal` and nothing is reported: that heartbeat ended the job CANCELLED. A heartbeat
 * answering 409 `lease_lost` (taken over, or past the attempt's `timeout_at`) aborts
 * `ctx.signal` and nothing is reported either. A task that throws fails its attempt
 * (`retryable` unless it throws a `NonRetryableError` or an error whose `retryable` is false); a
 * result the server refuses as too large (413) is reported as a non-retryable
 * `PayloadTooLarge` failure. No runtime dependencies: the platform's `fetch` only;
 * `sigv4: true` signs requests with `@smithy/signature-v4`, an optional peer dependency.
 */
import { createHash, createHmac, randomUUID } from "node:crypto";
import { hostname } from "node:os";

/** The protocol version this worker speaks (docs/protocol.md), sent with each lease. */
export const PROTOCOL = 1;

/** A failure that must not be retried: the job goes straight to its dead end. */
export class NonRetryableError extends Error {
  readonly retryable = false;
  constructor(message: string) {
    super(message);
    this.name = "NonRetryableError";
  }
}

/** The server answered 409 `lease_lost`: another worker holds the job now. */
export class LeaseLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LeaseLostError";
  }
}

/** The server answered a status other than 2xx (and not `lease_lost`). */
export class HttpError extends Error {
  constructor(readonly status: number, readonly body: string) {
    super(`HTTP ${status}: ${body.slice(0, 300)}`);
    this.name = "HttpError";
  }
}

export interface SigV4Options {
  region?: string;
  service?: string;
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

export interface WorkerOptions {
  /** The API's base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  pool: string;
  workerId?: string;
  /** Jobs run at once by this worker (default 4). */
  maxJobs?: number;
  /** Long-poll length of one lease request, 0..20 s (default 20). */
  waitSeconds?: number;
  /** Sign requests with SigV4 (service execute-api) when deployed behind API Gateway. */
  sigv4?: boolean | SigV4Options;
  /** Stop on SIGTERM and SIGINT (default true). */
  handleSignals?: boolean;
  /** Where warnings go (default console.error). */
  log?: (message: string) => void;
}

export interface JobContext {
  readonly jobId: string;
  readonly task: string;
  readonly attempt: number;
  readonly tenant: string;
  readonly workerId: string;
  readonly deadlineAt: string | null;
  /** The W3C trace context the job was submitted in (null: none): a span of the job is its child. */
  readonly traceparent: string | null;
  readonly tracestate: string | null;
  /** Aborted when a heartbeat answers cancel_requested (reason "cancel requested") or 409 lease_lost ("lease lost"). */
  readonly signal: AbortSignal;
  /** Reports progress with a heartbeat now (and with every later heartbeat). */
  progress(value: unknown): Promise<void>;
}

export type TaskHandler = (payload: any, ctx: JobContext) => unknown | Promise<unknown>;

interface LeasedJob {
  job_id: string;
  task: string;
  payload: unknown;
  attempt: number;
  tenant: string;
  deadline_at: string | null;
  traceparent?: string | null;
  tracestate?: string | null;
  lease: { token: string; expires_at: string };
}

/** The cell a 421 answer names: its URL (http or https only) and Region, or null. */
function homeOf(header: string | null, answer: string): { url: string; region?: string } | null {
  let error: any = {};
  try {
    error = JSON.parse(answer)?.error ?? {};
  } catch {
    error = {};
  }
  const raw = header || (typeof error.home_url === "string" ? error.home_url : "");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  return { url: raw.replace(/\/+$/, ""), region: typeof error.home === "string" ? error.home : undefined };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class Worker {
  /** The API's base URL; a 421 misdirected answer re-points it to the cell it names. */
  url: string;
  readonly pool: string;
  readonly workerId: string;
  readonly maxJobs: number;
  readonly waitSeconds: number;
  private readonly tasks = new Map<string, TaskHandler>();
  private readonly running = new Set<Promise<void>>();
  private readonly log: (message: string) => void;
  private readonly handleSignals: boolean;
  private sigv4?: SigV4Options;
  private signer?: Promise<any>;
  private stopping = false;
  private wake: () => void = () => {};

  constructor(options: WorkerOptions) {
    if (!options.url || !options.pool) throw new TypeError("Worker needs url and pool");
    this.url = options.url.replace(/\/+$/, "");
    this.pool = options.pool;
    this.workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.maxJobs = Math.max(1, options.maxJobs ?? 4);
    this.waitSeconds = Math.min(20, Math.max(0, options.waitSeconds ?? 20));
    this.handleSignals = options.handleSignals ?? true;
    this.log = options.log ?? ((m) => console.error(`leasehold-worker: ${m}`));
    if (options.sigv4) this.sigv4 = options.sigv4 === true ? {} : options.sigv4;
  }

  /** Registers the handler of a task of this pool. */
  task(name: string, handler: TaskHandler): this {
    this.tasks.set(name, handler);
    return this;
  }

  /** Stops leasing; run() resolves once the in-flight jobs have finished and reported. */
  stop(): void {
    this.stopping = true;
    this.wake();
  }

  /** Leases and runs jobs until stop() (or SIGTERM); `onReady` is called once it polls. */
  async run(onReady?: () => void): Promise<void> {
    if (this.tasks.size === 0) throw new Error("register at least one task before run()");
    const onSignal = () => this.stop();
    if (this.handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    try {
      onReady?.();
      while (!this.stopping) {
        const free = this.maxJobs - this.running.size;
        if (free <= 0) {
          await Promise.race([...this.running, new Promise<void>((r) => (this.wake = r))]);
          continue;
        }
        let jobs: LeasedJob[];
        try {
          // Never aborted on stop: jobs leased by this poll are ours and must run, not be left leased.
          const answer = await this.post("/workers/lease", {
            pool: this.pool, tasks: [...this.tasks.keys()].sort(), max_jobs: Math.min(free, 10),
            wait_seconds: this.waitSeconds, worker_id: this.workerId, protocol: PROTOCOL,
          }, (this.waitSeconds + 30) * 1000);
          jobs = answer.jobs;
        } catch (err) {
          this.log(`lease failed (${String(err)}); trying again`);
          await Promise.race([sleep(1000), new Promise<void>((r) => (this.wake = r))]);
          continue;
        }
        for (const job of jobs) {
          const done: Promise<void> = this.runJob(job).finally(() => {
            this.running.delete(done);
            this.wake();
          });
          this.running.add(done);
        }
      }
      await Promise.all([...this.running]);
    } finally {
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
  }

  private async runJob(job: LeasedJob): Promise<void> {
    const token = job.lease.token;
    const controller = new AbortController();
    let expires = Date.parse(job.lease.expires_at);
    let progress: { value: unknown } | undefined;
    let finished = false;
    let timer: NodeJS.Timeout | undefined;

    const beat = async (): Promise<void> => {
      if (finished || controller.signal.aborted) return;
      const body: Record<string, unknown> = { token };
      if (progress) body.progress = progress.value;
      try {
        const answer = await this.post(`/jobs/${encodeURIComponent(job.job_id)}/heartbeat`, body,
          Math.max(1000, expires - Date.now()));
        expires = Date.parse(answer.expires_at);
        if (answer.cancel_requested) controller.abort("cancel requested");
      } catch (err) {
        if (err instanceof LeaseLostError) controller.abort("lease lost");
        else {
          this.log(`heartbeat of ${job.job_id} failed (${String(err)})`);
          if (Date.now() >= expires) controller.abort("lease lost");
        }
      }
    };
    const schedule = () => {
      if (finished || controller.signal.aborted) return;
      timer = setTimeout(async () => {
        await beat();
        schedule();
      }, Math.max(50, (expires - Date.now()) / 3));
    };
    schedule();

    const ctx: JobContext = {
      jobId: job.job_id, task: job.task, attempt: job.attempt, tenant: job.tenant,
      workerId: this.workerId, deadlineAt: job.deadline_at ?? null,
      traceparent: job.traceparent ?? null, tracestate: job.tracestate ?? null, signal: controller.signal,
      progress: async (value: unknown) => {
        progress = { value };
        await beat();
      },
    };

    let path: "complete" | "fail";
    let body: Record<string, unknown>;
    try {
      const handler = this.tasks.get(job.task);
      if (!handler) throw new NonRetryableError(`this worker has no task ${job.task}`);
      const result = await handler(job.payload, ctx);
      path = "complete";
      body = { token, result: result === undefined ? null : result };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      path = "fail";
      body = {
        token, retryable: (error as { retryable?: unknown }).retryable !== false,
        error: { type: error.name, message: error.message },
      };
    } finally {
      finished = true;
      clearTimeout(timer);
    }
    // Lost: another worker has it. Cancelled: the heartbeat that said so ended it. Report nothing.
    if (controller.signal.aborted) return;
    for (let tries = 0; tries < 5; tries++) {
      try {
        await this.post(`/jobs/${encodeURIComponent(job.job_id)}/${path}`, body, 30_000);
        return;
      } catch (err) {
        if (err instanceof LeaseLostError) return;
        if (err instanceof HttpError && err.status === 413 && path === "complete") {
          // The result is over the limits: the attempt ends PayloadTooLarge, never retried.
          path = "fail";
          body = { token, retryable: false,
            error: { type: "PayloadTooLarge", message: "the result is over the server's limit (413)" } };
          continue;
        }
        // A lost answer is safe to repeat: the server answers the finished job.
        if (err instanceof HttpError && err.status < 500 && err.status !== 429) {
          this.log(`reporting ${job.job_id} refused (${String(err)})`);
          return;
        }
        this.log(`reporting ${job.job_id} failed (try ${tries + 1}: ${String(err)})`);
        await sleep(200 * 2 ** tries);
      }
    }
  }

  /**
   * POSTs JSON; 409 lease_lost throws LeaseLostError, other non-2xx HttpError. A 421
   * misdirected answer naming another cell's URL (header Leasehold-Home-Url, else
   * error.home_url) re-points this worker there, for this and every later request, and sends
   * the request again there, once (docs/protocol.md, "Cells").
   */
  async post(path: string, body: unknown, timeoutMs: number, follow = true): Promise<any> {
    const text = JSON.stringify(body);
    let headers: Record<string, string> = { "content-type": "application/json" };
    if (this.sigv4) headers = await this.sign(path, text, headers);
    const response = await fetch(this.url + path, {
      method: "POST", headers, body: text, signal: AbortSignal.timeout(timeoutMs),
    });
    const answer = await response.text();
    if (response.status === 409 && answer.includes("lease_lost")) throw new LeaseLostError(answer);
    if (response.status === 421 && follow) {
      const home = homeOf(response.headers.get("leasehold-home-url"), answer);
      if (home && home.url !== this.url) {
        this.url = home.url;
        if (this.sigv4 && home.region) {  // sign for the home's Region from now on
          this.sigv4 = { ...this.sigv4, region: home.region };
          this.signer = undefined;
        }
        this.log(`the server sent this worker to ${home.url} (421 misdirected)`);
        return this.post(path, body, timeoutMs, false);
      }
    }
    if (!response.ok) throw new HttpError(response.status, answer);
    return answer ? JSON.parse(answer) : null;
  }

  private async sign(path: string, body: string, headers: Record<string, string>): Promise<Record<string, string>> {
    const options = this.sigv4!;
    this.signer ??= (async () => {
      const moduleName = "@smithy/signature-v4"; // optional peer dependency, loaded only here
      let mod: any;
      try {
        mod = await import(moduleName);
      } catch {
        throw new Error("sigv4: true needs the optional peer dependency @smithy/signature-v4 (npm install @smithy/signature-v4)");
      }
      const env = process.env;
      const credentials = options.credentials ?? {
        accessKeyId: env.AWS_ACCESS_KEY_ID ?? "", secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? "",
        sessionToken: env.AWS_SESSION_TOKEN,
      };
      if (!credentials.accessKeyId) throw new Error("sigv4: no credentials (AWS_ACCESS_KEY_ID)");
      return new mod.SignatureV4({
        service: options.service ?? "execute-api",
        region: options.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? "us-east-1",
        credentials, sha256: NodeSha256,
      });
    })();
    const signer = await this.signer;
    const url = new URL(this.url + path);
    const signed = await signer.sign({
      method: "POST", protocol: url.protocol, hostname: url.hostname,
      port: url.port ? Number(url.port) : undefined, path: url.pathname,
      headers: { ...headers, host: url.host }, body,
    });
    const { host: _host, ...rest } = signed.headers as Record<string, string>;
    return rest;
  }
}

/** The hash constructor @smithy/signature-v4 expects, from node:crypto (no @aws-crypto dependency). */
class NodeSha256 {
  private readonly hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  constructor(secret?: string | Uint8Array) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", secret);
  }
  update(data: string | Uint8Array): void {
    this.hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}
