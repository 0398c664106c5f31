import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { NonRetryableError, Worker } from "../index";
import { Answer, FakeServer, leasedJob, onceThenEmpty } from "./fake";

const ok = (body: unknown = {}): Answer => ({ body });

function worker(server: FakeServer, extra: Partial<ConstructorParameters<typeof Worker>[0]> = {}) {
  return new Worker({ url: server.url, pool: "p", workerId: "w-ts", maxJobs: 2, waitSeconds: 1,
    handleSignals: false, log: () => {}, ...extra });
}

test("a leased job runs and completes with its result and the lease's token", async () => {
  const lease = onceThenEmpty([leasedJob("j1", "add", { a: 2, b: 3 })]);
  const server = await new FakeServer((path, body) => (path === "/workers/lease" ? lease(body) : ok())).start();
  const w = worker(server).task("add", async (p: { a: number; b: number }, ctx) => ({ sum: p.a + p.b, attempt: ctx.attempt }));
  const running = w.run();
  await server.until((s) => s.named("/complete").length === 1);
  w.stop();
  await running;
  await server.stop();
  const [first] = server.named("/workers/lease");
  assert.deepEqual(first.body, { pool: "p", tasks: ["add"], max_jobs: 2, wait_seconds: 1, worker_id: "w-ts", protocol: 1 });
  assert.equal(server.named("/complete")[0].path, "/jobs/j1/complete");
  assert.deepEqual(server.named("/complete")[0].body, { token: "tok-j1-1", result: { sum: 5, attempt: 1 } });
  assert.equal(server.named("/fail").length, 0);
});

test("a job longer than its lease heartbeats at about a third of it, with progress", async () => {
  const lease = onceThenEmpty([leasedJob("j2", "slow", {}, 600)]);
  const server = await new FakeServer((path, body) => {
    if (path === "/workers/lease") return lease(body);
    if (path.endsWith("/heartbeat")) return ok({ expires_at: new Date(Date.now() + 600).toISOString(), cancel_requested: false });
    return ok();
  }).start();
  const w = worker(server).task("slow", async (_p, ctx) => {
    await new Promise((r) => setTimeout(r, 300));
    await ctx.progress({ done: 0.5 });
    await new Promise((r) => setTimeout(r, 700));
    return "done";
  });
  const running = w.run();
  await server.until((s) => s.named("/complete").length === 1);
  w.stop();
  await running;
  await server.stop();
  const beats = server.named("/heartbeat");
  // 1 s of work on a 600 ms lease renewed every ~200 ms: several beats, all before the finish.
  assert.ok(beats.length >= 4, `only ${beats.length} heartbeats`);
  assert.ok(beats.every((b) => b.body.token === "tok-j2-1"));
  assert.deepEqual(beats.filter((b) => "progress" in b.body).map((b) => b.body.progress)[0], { done: 0.5 });
  assert.ok(beats.every((b) => b.at <= server.named("/complete")[0].at));
  assert.deepEqual(server.named("/complete")[0].body, { token: "tok-j2-1", result: "done" });
});

test("cancel_requested aborts ctx.signal and nothing is reported (the heartbeat ended the job)", async () => {
  const lease = onceThenEmpty([leasedJob("j3", "wait", {}, 300)]);
  const server = await new FakeServer((path, body) => {
    if (path === "/workers/lease") return lease(body);
    if (path.endsWith("/heartbeat")) return ok({ expires_at: new Date(Date.now() + 300).toISOString(), cancel_requested: true });
    return ok();
  }).start();
  let reason: unknown;
  let returned = false;
  const w = worker(server).task("wait", async (_p, ctx) => {
    await new Promise((r) => ctx.signal.addEventListener("abort", r));
    reason = ctx.signal.reason;
    returned = true;
    return "finished anyway";
  });
  const running = w.run();
  await server.until(() => returned);
  // Give a wrongly sent finish time to arrive before looking.
  await new Promise((r) => setTimeout(r, 300));
  w.stop();
  await running;
  await server.stop();
  assert.equal(reason, "cancel requested");
  assert.equal(server.named("/heartbeat").length, 1, "no heartbeat after the cancel");
  assert.equal(server.named("/complete").length + server.named("/fail").length, 0);
});

test("a result refused as too large (413) is reported as a non-retryable PayloadTooLarge failure", async () => {
  const lease = onceThenEmpty([leasedJob("j9", "big", {})]);
  const server = await new FakeServer((path, body) => {
    if (path === "/workers/lease") return lease(body);
    if (path.endsWith("/complete")) return { status: 413, body: { error: { code: "payload_too_large", message: "too large", field: null } } };
    return ok();
  }).start();
  const w = worker(server).task("big", async () => "x".repeat(1000));
  const running = w.run();
  await server.until((s) => s.named("/fail").length === 1);
  w.stop();
  await running;
  await server.stop();
  assert.equal(server.named("/complete").length, 1, "the complete is not repeated");
  assert.deepEqual(server.named("/fail")[0].body, { token: "tok-j9-1", retryable: false,
    error: { type: "PayloadTooLarge", message: "the result is over the server's limit (413)" } });
});

test("409 lease_lost on a heartbeat aborts the job and nothing is reported", async () => {
  const lease = onceThenEmpty([leasedJob("j4", "wait", {}, 300)]);
  const server = await new FakeServer((path, body) => {
    if (path === "/workers/lease") return lease(body);
    if (path.endsWith("/heartbeat")) return { status: 409, body: { error: { code: "lease_lost", message: "taken over", field: null } } };
    return ok();
  }).start();
  let reason: unknown;
  let returned = false;
  const w = worker(server).task("wait", async (_p, ctx) => {
    await new Promise((r) => ctx.signal.addEventListener("abort", r));
    reason = ctx.signal.reason;
    returned = true;
    return "a zombie's result";
  });
  const running = w.run();
  await server.until(() => returned);
  // Give a wrongly sent finish time to arrive before looking.
  await new Promise((r) => setTimeout(r, 300));
  w.stop();
  await running;
  await server.stop();
  assert.equal(reason, "lease lost");
  assert.equal(server.named("/heartbeat").length, 1, "no heartbeat after the lease was lost");
  assert.equal(server.named("/complete").length + server.named("/fail").length, 0);
});

test("a thrown error fails the attempt with its name and message; NonRetryableError is not retryable", async () => {
  const lease = onceThenEmpty([leasedJob("j5", "boom", { retry: true }), leasedJob("j6", "boom", { retry: false })]);
  const server = await new FakeServer((path, body) => (path === "/workers/lease" ? lease(body) : ok())).start();
  class DiskFull extends Error { override name = "DiskFull"; }
  const w = worker(server).task("boom", async (p: { retry: boolean }) => {
    throw p.retry ? new DiskFull("no space") : new NonRetryableError("bad input");
  });
  const running = w.run();
  await server.until((s) => s.named("/fail").length === 2);
  w.stop();
  await running;
  await server.stop();
  const fails = Object.fromEntries(server.named("/fail").map((r) => [r.path, r.body]));
  assert.deepEqual(fails["/jobs/j5/fail"], { token: "tok-j5-1", retryable: true, error: { type: "DiskFull", message: "no space" } });
  assert.deepEqual(fails["/jobs/j6/fail"], { token: "tok-j6-1", retryable: false, error: { type: "NonRetryableError", message: "bad input" } });
  assert.equal(server.named("/complete").length, 0);
});

test("a finish whose answer is lost (5xx) is sent again; the same token both times", async () => {
  const lease = onceThenEmpty([leasedJob("j7", "add", {})]);
  let failures = 1;
  const server = await new FakeServer((path, body) => {
    if (path === "/workers/lease") return lease(body);
    if (path.endsWith("/complete") && failures-- > 0) return { status: 503, body: { error: { code: "unavailable" } } };
    return ok();
  }).start();
  const w = worker(server).task("add", async () => 1);
  const running = w.run();
  await server.until((s) => s.named("/complete").length === 2);
  w.stop();
  await running;
  await server.stop();
  assert.deepEqual(server.named("/complete").map((r) => r.body), [{ token: "tok-j7-1", result: 1 }, { token: "tok-j7-1", result: 1 }]);
});

test("SIGTERM stops leasing, lets the in-flight job finish and report, and exits 0", async () => {
  const lease = onceThenEmpty([leasedJob("j8", "slow", { ms: 400 })], 1000);
  const server = await new FakeServer((path, body) => (path === "/workers/lease" ? lease(body) : ok())).start();
  const child = spawn(process.execPath, [join(__dirname, "drain-child.js")], {
    env: { ...process.env, FAKE_URL: server.url }, stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  // The job runs and the worker's next long poll is held by the server: now stop it.
  await server.until((s) => s.named("/workers/lease").length === 2 && out.includes("started"));
  const killedAt = Date.now();
  child.kill("SIGTERM");
  const code = await exited;
  await server.stop();
  assert.equal(code, 0);
  assert.deepEqual(server.named("/complete").map((r) => r.body), [{ token: "tok-j8-1", result: { slept: 400 } }]);
  assert.ok(server.named("/complete")[0].at >= killedAt, "the job finished after SIGTERM, not cut short");
  assert.equal(server.named("/workers/lease").length, 2, "no lease request after SIGTERM");
});

test("a 421 misdirected re-points the worker to the cell it names, for the retry and later requests", async () => {
  const lease = onceThenEmpty([leasedJob("j9", "add", { a: 1, b: 1 })]);
  const home = await new FakeServer((path, body) => (path === "/workers/lease" ? lease(body) : ok())).start();
  const elsewhere = await new FakeServer(() => ({
    status: 421, headers: { "leasehold-home-url": home.url + "/" },
    body: { error: { code: "misdirected", message: "elsewhere", field: null, home: "us-east-2", home_url: home.url } },
  })).start();
  const w = worker(elsewhere).task("add", async (p: { a: number; b: number }) => p.a + p.b);
  const running = w.run();
  await home.until((s) => s.named("/complete").length === 1);
  w.stop();
  await running;
  await home.stop();
  await elsewhere.stop();
  // Only the first lease went there (Node's fetch itself sends a request that met 421 once
  // more, on a new connection, before the worker sees the answer): nothing after it.
  assert.deepEqual([...new Set(elsewhere.requests.map((r) => r.path))], ["/workers/lease"]);
  assert.ok(elsewhere.requests.every((r) => r.at <= home.requests[0].at));
  assert.equal(home.named("/workers/lease")[0].body.pool, "p");
  assert.deepEqual(home.named("/complete")[0].body, { token: "tok-j9-1", result: 2 });
  assert.equal(w.url, home.url);
});
