/**
 * The conformance task set of the HTTP lease protocol (issue 34) on the TypeScript worker.
 *
 *   LEASEHOLD_URL=http://127.0.0.1:8080 LEASEHOLD_POOL=conformance \
 *     node workers/typescript/dist/conformance.js
 *
 * Environment: LEASEHOLD_URL, LEASEHOLD_POOL, LEASEHOLD_WORKER_ID, LEASEHOLD_MAX_JOBS (default 4),
 * LEASEHOLD_WAIT_SECONDS (default 20). Prints `ready` once it polls; SIGTERM drains and exits 0.
 */
import { appendFileSync } from "node:fs";
import { JobContext, Worker } from "./index";

const LANG = "typescript";

class ConformanceError extends Error {
  constructor(message: string, readonly retryable: boolean) {
    super(message);
    this.name = "ConformanceError";
  }
}

function logLine(payload: any, event: string, ctx: JobContext): void {
  const path = payload && typeof payload === "object" ? payload.log : undefined;
  if (path) appendFileSync(path, `${event} ${ctx.jobId} ${LANG} ${ctx.workerId} ${Date.now()}\n`);
}

export function build(worker: Worker): Worker {
  worker.task("conformance.echo", async (payload, ctx) => {
    logLine(payload, "start", ctx);
    return {
      echo: payload, language: LANG, worker_id: ctx.workerId, attempt: ctx.attempt,
      traceparent: ctx.traceparent, tracestate: ctx.tracestate,
    };
  });
  worker.task("conformance.fail", async (payload, ctx) => {
    const p = payload && typeof payload === "object" ? payload : {};
    if (p.succeed_on_attempt != null && ctx.attempt >= Number(p.succeed_on_attempt)) {
      return { attempt: ctx.attempt, language: LANG };
    }
    throw new ConformanceError(p.message || "boom", p.retryable ?? true);
  });
  worker.task("conformance.sleep", async (payload, ctx) => {
    const seconds = Number(payload?.seconds ?? 0);
    logLine(payload, "start", ctx);
    const ends = Date.now() + seconds * 1000;
    for (let left = ends - Date.now(); left > 0; left = ends - Date.now()) {
      if (ctx.signal.aborted) {
        logLine(payload, "cancelled", ctx);
        return null;
      }
      await new Promise((r) => setTimeout(r, Math.min(100, left)));
    }
    if (ctx.signal.aborted) {
      logLine(payload, "cancelled", ctx);
      return null;
    }
    logLine(payload, "end", ctx);
    return { slept: seconds, language: LANG, worker_id: ctx.workerId };
  });
  return worker;
}

async function main(): Promise<void> {
  const env = process.env;
  if (!env.LEASEHOLD_URL || !env.LEASEHOLD_POOL) {
    console.error("conformance: set LEASEHOLD_URL and LEASEHOLD_POOL");
    process.exit(2);
  }
  const worker = build(new Worker({
    url: env.LEASEHOLD_URL, pool: env.LEASEHOLD_POOL, workerId: env.LEASEHOLD_WORKER_ID || undefined,
    maxJobs: Number(env.LEASEHOLD_MAX_JOBS || 4), waitSeconds: Number(env.LEASEHOLD_WAIT_SECONDS || 20),
    sigv4: env.LEASEHOLD_SIGV4 === "1", // a deployed API (API Gateway, IAM auth)
  }));
  await worker.run(() => console.log("ready"));
  process.exit(0);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
