package leasehold;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;

/** The conformance task set of the HTTP lease protocol (PROTOCOL, issue 34) on the Java worker. */
final class Conformance {
    static final String LANG = "java";

    static final class ConformanceError extends Exception {
        private static final long serialVersionUID = 1L;
        ConformanceError(String message) { super(message); }
    }

    static void logLine(Object payload, String event, Worker.Context ctx) throws IOException {
        Object path = payload instanceof Map<?, ?> map ? map.get("log") : null;
        if (path instanceof String file && !file.isEmpty()) {
            String line = event + " " + ctx.jobId + " " + LANG + " " + ctx.workerId + " " + System.currentTimeMillis() + "\n";
            Files.writeString(Path.of(file), line, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.APPEND);
        }
    }

    static Worker build(Worker worker) {
        worker.task("conformance.echo", (payload, ctx) -> {
            logLine(payload, "start", ctx);
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("echo", payload);
            result.put("language", LANG);
            result.put("worker_id", ctx.workerId);
            result.put("attempt", ctx.attempt);
            result.put("traceparent", ctx.traceparent);
            result.put("tracestate", ctx.tracestate);
            return result;
        });
        worker.task("conformance.fail", (payload, ctx) -> {
            Map<?, ?> p = payload instanceof Map<?, ?> map ? map : Map.of();
            if (p.get("succeed_on_attempt") instanceof Number n && ctx.attempt >= n.intValue()) {
                return Map.of("attempt", ctx.attempt, "language", LANG);
            }
            String message = p.get("message") instanceof String s && !s.isEmpty() ? s : "boom";
            if (Boolean.FALSE.equals(p.get("retryable"))) throw new Worker.NonRetryableException("ConformanceError", message);
            throw new ConformanceError(message);
        });
        worker.task("conformance.sleep", (payload, ctx) -> {
            Map<?, ?> p = payload instanceof Map<?, ?> map ? map : Map.of();
            double seconds = p.get("seconds") instanceof Number n ? n.doubleValue() : 0;
            logLine(payload, "start", ctx);
            long ends = System.nanoTime() + (long) (seconds * 1e9);
            for (long left = ends - System.nanoTime(); left > 0; left = ends - System.nanoTime()) {
                if (ctx.sleep(Math.max(1, Math.min(100, left / 1_000_000)))) break;
            }
            if (ctx.isCancelled()) {
                logLine(payload, "cancelled", ctx);
                return null;
            }
            logLine(payload, "end", ctx);
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("slept", seconds);
            result.put("language", LANG);
            result.put("worker_id", ctx.workerId);
            return result;
        });
        return worker;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> env = System.getenv();
        String url = env.get("LEASEHOLD_URL"), pool = env.get("LEASEHOLD_POOL");
        if (url == null || pool == null) {
            System.err.println("conformance: set LEASEHOLD_URL and LEASEHOLD_POOL");
            System.exit(2);
        }
        Worker worker = build(new Worker(url, pool, env.get("LEASEHOLD_WORKER_ID"),
                Integer.parseInt(env.getOrDefault("LEASEHOLD_MAX_JOBS", "4")),
                Integer.parseInt(env.getOrDefault("LEASEHOLD_WAIT_SECONDS", "20"))));
        if ("1".equals(env.get("LEASEHOLD_SIGV4"))) worker.sigv4(SigV4.fromEnv("execute-api")); // a deployed API
        worker.run(() -> {
            System.out.println("ready");
            System.out.flush();
        });
        System.exit(0);
    }
}
