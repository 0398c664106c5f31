/*
 * A Leasehold worker for Java 17 over the HTTP lease protocol (issue 34); standard library only.
 *
 *   Worker worker = new Worker("http://127.0.0.1:8080", "images", null, 4, 20);
 *   worker.task("resize", (payload, ctx) -> Map.of("ok", true));
 *   worker.run(null);   // until SIGTERM: stops leasing, in-flight jobs finish, then exits 0
 *
 * The protocol is docs/protocol.md (version 1). Each leased job heartbeats in the background at
 * about a third of what is left of its lease. A heartbeat answering cancel_requested sets
 * ctx.isCancelled() and nothing is reported: that heartbeat ended the job CANCELLED. A heartbeat
 * answering 409 lease_lost (taken over, or past the attempt's timeout_at) sets ctx.isCancelled()
 * too, and nothing is reported. A task that throws fails its attempt, retryable unless it throws
 * a NonRetryableException; a result the server refuses as too large (413) is reported as a
 * non-retryable "PayloadTooLarge" failure.
 *
 * Deployed: worker.sigv4(SigV4.fromEnv("execute-api")) signs requests (javax.crypto HMAC).
 *
 * Build:    make workers (workers/java/build.sh): workers/java/build/leasehold-worker.jar
 * Run it:   java -cp workers/java/build/leasehold-worker.jar leasehold.Conformance
 * The conformance task set reads LEASEHOLD_URL, LEASEHOLD_POOL, LEASEHOLD_WORKER_ID,
 * LEASEHOLD_MAX_JOBS (default 4) and LEASEHOLD_WAIT_SECONDS (default 20).
 */
package leasehold;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

@SuppressWarnings("unchecked")
public class Worker {
    /** The protocol version this worker speaks (docs/protocol.md), sent with each lease. */
    public static final int PROTOCOL = 1;

    /** A task's code: the job's payload (parsed JSON) in, its result (JSON-able) out. */
    @FunctionalInterface
    public interface Task {
        Object run(Object payload, Context ctx) throws Exception;
    }

    /** A failure that must not be retried: the job goes straight to its dead end. */
    public static class NonRetryableException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        /** The error type reported (the class's simple name unless given). */
        public final String type;
        public NonRetryableException(String message) { this(null, message); }
        public NonRetryableException(String type, String message) {
            super(message);
            this.type = type != null ? type : getClass().getSimpleName();
        }
    }

    /** The server answered 409 lease_lost: another worker holds the job now. */
    public static class LeaseLostException extends IOException {
        private static final long serialVersionUID = 1L;
        public LeaseLostException(String message) { super(message); }
    }

    /** The server answered a status other than 2xx (and not lease_lost). */
    public static class HttpException extends IOException {
        private static final long serialVersionUID = 1L;
        public final int status;
        public HttpException(int status, String body) {
            super("HTTP " + status + ": " + (body.length() > 300 ? body.substring(0, 300) : body));
            this.status = status;
        }
    }

    /** What a running job knows: its identity, whether to stop, and a way to report progress. */
    public static final class Context {
        public final String jobId, task, tenant, workerId, deadlineAt;
        /** The W3C trace context the job was submitted in (null: none): make spans its children. */
        public final String traceparent, tracestate;
        public final int attempt;
        private final CountDownLatch stopped = new CountDownLatch(1);
        private volatile String reason;
        private volatile Object progress;
        private volatile boolean hasProgress;
        private Runnable beatNow = () -> {};

        Context(String jobId, String task, int attempt, String tenant, String workerId, String deadlineAt,
                String traceparent, String tracestate) {
            this.jobId = jobId; this.task = task; this.attempt = attempt; this.tenant = tenant;
            this.workerId = workerId; this.deadlineAt = deadlineAt;
            this.traceparent = traceparent; this.tracestate = tracestate;
        }

        /** True once a heartbeat answered cancel_requested or the lease was lost. */
        public boolean isCancelled() { return reason != null; }

        /** "cancel requested", "lease lost", or null. */
        public String reason() { return reason; }

        /** Sleeps up to millis; true if the job was cancelled meanwhile (then it returns at once). */
        public boolean sleep(long millis) throws InterruptedException {
            return stopped.await(millis, TimeUnit.MILLISECONDS);
        }

        /** Reports progress with a heartbeat now (and with every later heartbeat). */
        public void progress(Object value) {
            progress = value;
            hasProgress = true;
            beatNow.run();
        }

        synchronized void stop(String why) {
            if (reason == null) {
                reason = why;
                stopped.countDown();
            }
        }
    }

    private static final class Leased {
        final Map<String, Object> job;
        final String jobId, token;
        volatile Instant expires;
        Leased(Map<String, Object> job) {
            this.job = job;
            this.jobId = (String) job.get("job_id");
            Map<?, ?> lease = (Map<?, ?>) job.get("lease");
            this.token = (String) lease.get("token");
            this.expires = instant((String) lease.get("expires_at"));
        }
    }

    /** The API's base URL; a 421 misdirected answer re-points it to the cell it names. */
    public volatile String url;
    public final String pool, workerId;
    public final int maxJobs, waitSeconds;
    private final Map<String, Task> tasks = new ConcurrentHashMap<>();
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10)).build();
    private final AtomicBoolean stopping = new AtomicBoolean();
    private final CountDownLatch drained = new CountDownLatch(1);
    private final Semaphore slots;
    private final ExecutorService jobs;
    private final ScheduledExecutorService beats;
    private Consumer<String> log = message -> System.err.println("leasehold-worker: " + message);
    private SigV4 signer;

    public Worker(String url, String pool, String workerId, int maxJobs, int waitSeconds) {
        if (url == null || pool == null) throw new IllegalArgumentException("Worker needs url and pool");
        this.url = url.replaceAll("/+$", "");
        this.pool = pool;
        this.workerId = workerId != null && !workerId.isEmpty() ? workerId
                : ProcessHandle.current().pid() + "-" + UUID.randomUUID().toString().substring(0, 8);
        this.maxJobs = Math.max(1, maxJobs);
        this.waitSeconds = Math.min(20, Math.max(0, waitSeconds));
        this.slots = new Semaphore(this.maxJobs);
        this.jobs = Executors.newFixedThreadPool(this.maxJobs, daemon("leasehold-job"));
        this.beats = Executors.newScheduledThreadPool(Math.min(4, this.maxJobs), daemon("leasehold-heartbeat"));
    }

    /** Registers the code of a task of this pool. */
    public Worker task(String name, Task task) {
        tasks.put(name, task);
        return this;
    }

    /** Where warnings go (default stderr). */
    public Worker log(Consumer<String> log) {
        this.log = log;
        return this;
    }

    /** Signs every request with SigV4 (deployed behind API Gateway: service execute-api). */
    public Worker sigv4(SigV4 signer) {
        this.signer = signer;
        return this;
    }

    /** Stops leasing; run() returns once in-flight jobs have finished and reported. */
    public void stop() { stopping.set(true); }

    /**
     * Leases and runs jobs until stop() or SIGTERM (a shutdown hook: it stops leasing, waits for
     * the in-flight jobs to finish and report, then ends the process with status 0).
     */
    public void run(Runnable onReady) throws InterruptedException {
        if (tasks.isEmpty()) throw new IllegalStateException("register at least one task before run()");
        Thread hook = new Thread(() -> {
            if (stopping.getAndSet(true)) return; // stopped on purpose: the process ends as it chose
            try {
                drained.await();
            } catch (InterruptedException ignored) {
                // exit anyway
            }
            System.out.flush();
            Runtime.getRuntime().halt(0);
        }, "leasehold-sigterm");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            if (onReady != null) onReady.run();
            while (!stopping.get()) {
                if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) continue;
                int free = 1 + slots.drainPermits();
                List<Object> leased;
                try {
                    Map<String, Object> body = new LinkedHashMap<>();
                    body.put("pool", pool);
                    body.put("tasks", new ArrayList<>(new TreeSet<>(tasks.keySet())));
                    body.put("max_jobs", Math.min(free, 10));
                    body.put("wait_seconds", waitSeconds);
                    body.put("worker_id", workerId);
                    body.put("protocol", PROTOCOL);
                    // Never cut short on stop: jobs this poll leases are ours to run, not to leave leased.
                    leased = (List<Object>) ((Map<?, ?>) post("/workers/lease", body, waitSeconds + 30)).get("jobs");
                } catch (IOException | RuntimeException e) {
                    slots.release(free);
                    log.accept("lease failed (" + e + "); trying again");
                    Thread.sleep(1000);
                    continue;
                }
                slots.release(free - Math.min(free, leased.size()));
                for (Object job : leased) {
                    Leased one = new Leased((Map<String, Object>) job);
                    jobs.execute(() -> {
                        try {
                            runJob(one);
                        } finally {
                            slots.release();
                        }
                    });
                }
            }
            slots.acquire(maxJobs); // every in-flight job has finished and reported
            slots.release(maxJobs);
        } finally {
            drained.countDown();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running: it ends the process
            }
        }
    }

    private void runJob(Leased job) {
        Map<String, Object> raw = job.job;
        Context ctx = new Context(job.jobId, (String) raw.get("task"), ((Number) raw.get("attempt")).intValue(),
                (String) raw.get("tenant"), workerId, (String) raw.get("deadline_at"),
                (String) raw.get("traceparent"), (String) raw.get("tracestate"));
        AtomicBoolean finished = new AtomicBoolean();
        ScheduledFuture<?>[] next = new ScheduledFuture<?>[1];
        Runnable beat = () -> heartbeat(job, ctx, finished);
        Runnable[] schedule = new Runnable[1];
        schedule[0] = () -> {
            if (finished.get() || ctx.isCancelled()) return;
            long delay = Math.max(50, Duration.between(Instant.now(), job.expires).toMillis() / 3);
            synchronized (next) {
                next[0] = beats.schedule(() -> { beat.run(); schedule[0].run(); }, delay, TimeUnit.MILLISECONDS);
            }
        };
        ctx.beatNow = beat;
        schedule[0].run();

        String path;
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("token", job.token);
        try {
            Task task = tasks.get(ctx.task);
            if (task == null) throw new NonRetryableException("this worker has no task " + ctx.task);
            Object result = task.run(raw.get("payload"), ctx);
            path = "complete";
            body.put("result", result);
        } catch (Exception e) {
            path = "fail";
            Map<String, Object> error = new LinkedHashMap<>();
            error.put("type", e instanceof NonRetryableException n ? n.type : e.getClass().getSimpleName());
            error.put("message", e.getMessage() == null ? e.toString() : e.getMessage());
            body.put("error", error);
            body.put("retryable", !(e instanceof NonRetryableException));
        } finally {
            finished.set(true);
            synchronized (next) {
                if (next[0] != null) next[0].cancel(false);
            }
        }
        // Lost: another worker has it. Cancelled: the heartbeat that said so ended it. Report nothing.
        if (ctx.isCancelled()) return;
        for (int tries = 0; tries < 5; tries++) {
            try {
                post("/jobs/" + job.jobId + "/" + path, body, 30);
                return;
            } catch (LeaseLostException e) {
                return;
            } catch (HttpException e) {
                if (e.status == 413 && "complete".equals(path)) {
                    // The result is over the limits: the attempt ends PayloadTooLarge, never retried.
                    path = "fail";
                    body.clear();
                    body.put("token", job.token);
                    body.put("error", Map.of("type", "PayloadTooLarge",
                            "message", "the result is over the server's limit (413)"));
                    body.put("retryable", false);
                    tries--;
                    continue;
                }
                if (e.status < 500 && e.status != 429) {
                    log.accept("reporting " + job.jobId + " refused (" + e.getMessage() + ")");
                    return;
                }
                log.accept("reporting " + job.jobId + " failed (try " + (tries + 1) + ": " + e.getMessage() + ")");
            } catch (IOException | RuntimeException e) {
                // A lost answer is safe to repeat: the server answers the finished job.
                log.accept("reporting " + job.jobId + " failed (try " + (tries + 1) + ": " + e + ")");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            try {
                Thread.sleep(200L << tries);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private void heartbeat(Leased job, Context ctx, AtomicBoolean finished) {
        if (finished.get() || ctx.isCancelled()) return;
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("token", job.token);
        if (ctx.hasProgress) body.put("progress", ctx.progress);
        try {
            long left = Math.max(1, Duration.between(Instant.now(), job.expires).toSeconds());
            Map<?, ?> answer = (Map<?, ?>) post("/jobs/" + job.jobId + "/heartbeat", body, left);
            job.expires = instant((String) answer.get("expires_at"));
            if (Boolean.TRUE.equals(answer.get("cancel_requested"))) ctx.stop("cancel requested");
        } catch (LeaseLostException e) {
            ctx.stop("lease lost");
        } catch (IOException | RuntimeException e) {
            log.accept("heartbeat of " + job.jobId + " failed (" + e + ")");
            if (!Instant.now().isBefore(job.expires)) ctx.stop("lease lost");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * POSTs JSON; 409 lease_lost throws LeaseLostException, any other non-2xx HttpException. A 421
     * misdirected answer naming another cell's URL (header Leasehold-Home-Url, else error.home_url)
     * re-points this worker there, for this and every later request, and sends the request again
     * there, once (docs/protocol.md, "Cells").
     */
    public Object post(String path, Object body, long timeoutSeconds) throws IOException, InterruptedException {
        return post(path, body, timeoutSeconds, true);
    }

    private Object post(String path, Object body, long timeoutSeconds, boolean follow)
            throws IOException, InterruptedException {
        URI uri = URI.create(url + path);
        byte[] bytes = Json.write(body).getBytes(StandardCharsets.UTF_8);
        HttpRequest.Builder builder = HttpRequest.newBuilder(uri)
                .timeout(Duration.ofSeconds(timeoutSeconds))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(bytes));
        if (signer != null) {
            signer.sign("POST", uri, Map.of("content-type", "application/json"), bytes, Instant.now())
                    .forEach(builder::header);
        }
        HttpRequest request = builder.build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        String text = response.body();
        if (response.statusCode() == 409 && text.contains("lease_lost")) throw new LeaseLostException(text);
        if (response.statusCode() == 421 && follow) {
            String[] home = homeOf(response.headers().firstValue("leasehold-home-url").orElse(null), text);
            if (home != null && !home[0].equals(url)) {
                url = home[0];
                if (signer != null && home[1] != null) signer = signer.inRegion(home[1]);
                log.accept("the server sent this worker to " + url + " (421 misdirected)");
                return post(path, body, timeoutSeconds, false);
            }
        }
        if (response.statusCode() / 100 != 2) throw new HttpException(response.statusCode(), text);
        return text.isEmpty() ? null : Json.parse(text);
    }

    /** The cell a 421 answer names: {its URL (http or https only), its Region or null}, or null. */
    static String[] homeOf(String header, String text) {
        Map<?, ?> error = Map.of();
        try {
            Object answer = Json.parse(text);
            if (answer instanceof Map<?, ?> map && map.get("error") instanceof Map<?, ?> e) error = e;
        } catch (RuntimeException notJson) {
            // the header alone names it
        }
        String raw = header != null && !header.isEmpty() ? header
                : error.get("home_url") instanceof String s ? s : null;
        if (raw == null) return null;
        String scheme;
        try {
            scheme = URI.create(raw).getScheme();
        } catch (IllegalArgumentException notUri) {
            return null;
        }
        if (!"http".equals(scheme) && !"https".equals(scheme)) return null;
        return new String[] {raw.replaceAll("/+$", ""), error.get("home") instanceof String r ? r : null};
    }

    static Instant instant(String iso) {
        try {
            return OffsetDateTime.parse(iso).toInstant();
        } catch (RuntimeException noOffset) {
            return LocalDateTime.parse(iso).toInstant(ZoneOffset.UTC);
        }
    }

    private static java.util.concurrent.ThreadFactory daemon(String name) {
        return runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        };
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--conformance")) {
            Conformance.main(new String[0]);
            return;
        }
        System.err.println("usage: java -cp leasehold-worker.jar leasehold.Worker --conformance   (the conformance task set; see PROTOCOL)");
        System.exit(2);
    }
}
