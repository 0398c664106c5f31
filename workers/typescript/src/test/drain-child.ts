/** The SIGTERM test's worker process: one slow task; exits 0 once run() resolves. */
import { Worker } from "../index";

const worker = new Worker({ url: process.env.FAKE_URL!, pool: "p", workerId: "child", maxJobs: 2, waitSeconds: 1 });
worker.task("slow", async (payload: { ms: number }) => {
  console.log("started");
  await new Promise((r) => setTimeout(r, payload.ms));
  return { slept: payload.ms };
});
worker.run().then(() => process.exit(0));
