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
 * Deployed: worker.sigv4(Worker.SigV4.fromEnv("execute-api")) signs requests (javax.crypto HMAC).
 *
 * Run it:   java workers/java/Worker.java --conformance       (source launch, no build step)
 * or build: workers/java/build.sh && java -cp workers/java/build leasehold.Conformance
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
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
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

    public final String url, pool, workerId;
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

    /** POSTs JSON; 409 lease_lost throws LeaseLostException, any other non-2xx HttpException. */
    public Object post(String path, Object body, long timeoutSeconds) throws IOException, InterruptedException {
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
        if (response.statusCode() / 100 != 2) throw new HttpException(response.statusCode(), text);
        return text.isEmpty() ? null : Json.parse(text);
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
        System.err.println("usage: java Worker.java --conformance   (the conformance task set; see PROTOCOL)");
        System.exit(2);
    }

    /**
     * AWS Signature Version 4 with javax.crypto (no SDK): the headers to add to a request
     * (x-amz-date, x-amz-security-token when the credentials have one, authorization). It signs
     * host, x-amz-date, the token and the headers given; the path is used as given (the lease
     * protocol's paths need no escaping).
     */
    public static final class SigV4 {
        private final String accessKey, secretKey, sessionToken, region, service;

        public SigV4(String accessKey, String secretKey, String sessionToken, String region, String service) {
            this.accessKey = accessKey; this.secretKey = secretKey; this.sessionToken = sessionToken;
            this.region = region; this.service = service;
        }

        /** Credentials and region from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION. */
        public static SigV4 fromEnv(String service) {
            Map<String, String> env = System.getenv();
            String key = env.get("AWS_ACCESS_KEY_ID"), secret = env.get("AWS_SECRET_ACCESS_KEY");
            if (key == null || secret == null) throw new IllegalStateException("sigv4: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
            String region = env.getOrDefault("AWS_REGION", env.getOrDefault("AWS_DEFAULT_REGION", "us-east-1"));
            return new SigV4(key, secret, env.get("AWS_SESSION_TOKEN"), region, service);
        }

        public Map<String, String> sign(String method, URI uri, Map<String, String> headers, byte[] body, Instant now) {
            String amzDate = java.time.format.DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'")
                    .withZone(ZoneOffset.UTC).format(now);
            String day = amzDate.substring(0, 8);
            java.util.TreeMap<String, String> signed = new java.util.TreeMap<>();
            headers.forEach((name, value) -> signed.put(name.toLowerCase(java.util.Locale.ROOT), value.trim()));
            signed.put("host", uri.getHost() + (uri.getPort() == -1 ? "" : ":" + uri.getPort()));
            signed.put("x-amz-date", amzDate);
            if (sessionToken != null && !sessionToken.isEmpty()) signed.put("x-amz-security-token", sessionToken);
            StringBuilder canonicalHeaders = new StringBuilder();
            signed.forEach((name, value) -> canonicalHeaders.append(name).append(':').append(value).append('\n'));
            String signedNames = String.join(";", signed.keySet());
            String path = uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath();
            String query = uri.getRawQuery() == null ? "" : java.util.Arrays.stream(uri.getRawQuery().split("&"))
                    .map(pair -> pair.contains("=") ? pair : pair + "=").sorted().collect(java.util.stream.Collectors.joining("&"));
            String canonical = method + "\n" + path + "\n" + query + "\n" + canonicalHeaders + "\n" + signedNames + "\n" + hex(sha256(body));
            String scope = day + "/" + region + "/" + service + "/aws4_request";
            String toSign = "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n"
                    + hex(sha256(canonical.getBytes(StandardCharsets.UTF_8)));
            byte[] key = hmac(("AWS4" + secretKey).getBytes(StandardCharsets.UTF_8), day);
            key = hmac(hmac(hmac(key, region), service), "aws4_request");
            Map<String, String> out = new LinkedHashMap<>();
            out.put("x-amz-date", amzDate);
            if (signed.containsKey("x-amz-security-token")) out.put("x-amz-security-token", sessionToken);
            out.put("authorization", "AWS4-HMAC-SHA256 Credential=" + accessKey + "/" + scope
                    + ", SignedHeaders=" + signedNames + ", Signature=" + hex(hmac(key, toSign)));
            return out;
        }

        static byte[] sha256(byte[] data) {
            try {
                return java.security.MessageDigest.getInstance("SHA-256").digest(data);
            } catch (java.security.NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        }

        static byte[] hmac(byte[] key, String data) {
            try {
                javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
                mac.init(new javax.crypto.spec.SecretKeySpec(key, "HmacSHA256"));
                return mac.doFinal(data.getBytes(StandardCharsets.UTF_8));
            } catch (java.security.GeneralSecurityException e) {
                throw new IllegalStateException(e);
            }
        }

        static String hex(byte[] bytes) {
            StringBuilder out = new StringBuilder();
            for (byte b : bytes) out.append(String.format("%02x", b));
            return out.toString();
        }
    }

    /** A small, strict JSON reader and writer: objects are LinkedHashMaps, arrays Lists, numbers Long or Double. */
    public static final class Json {
        private final String text;
        private int at;

        private Json(String text) { this.text = text; }

        public static Object parse(String text) {
            Json json = new Json(text);
            json.space();
            Object value = json.value();
            json.space();
            if (json.at != text.length()) throw json.error("trailing characters");
            return value;
        }

        public static String write(Object value) {
            StringBuilder out = new StringBuilder();
            write(value, out);
            return out.toString();
        }

        private static void write(Object value, StringBuilder out) {
            if (value == null) out.append("null");
            else if (value instanceof String s) string(s, out);
            else if (value instanceof Boolean b) out.append(b);
            else if (value instanceof Double || value instanceof Float) {
                double d = ((Number) value).doubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) throw new IllegalArgumentException("JSON has no " + d);
                if (d == Math.rint(d) && Math.abs(d) < 1e15) out.append((long) d).append(".0");
                else out.append(d);
            } else if (value instanceof Number n) out.append(n);
            else if (value instanceof Map<?, ?> map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> entry : map.entrySet()) {
                    if (!(entry.getKey() instanceof String key)) throw new IllegalArgumentException("JSON keys are strings");
                    if (!first) out.append(',');
                    first = false;
                    string(key, out);
                    out.append(':');
                    write(entry.getValue(), out);
                }
                out.append('}');
            } else if (value instanceof Collection<?> list) {
                out.append('[');
                boolean first = true;
                for (Object item : list) {
                    if (!first) out.append(',');
                    first = false;
                    write(item, out);
                }
                out.append(']');
            } else if (value instanceof Object[] array) write(List.of(array), out);
            else throw new IllegalArgumentException("not JSON: " + value.getClass().getName());
        }

        private static void string(String s, StringBuilder out) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    case '\b' -> out.append("\\b");
                    case '\f' -> out.append("\\f");
                    default -> {
                        if (c < 0x20 || c == 0x2028 || c == 0x2029) out.append(String.format("\\u%04x", (int) c));
                        else out.append(c);
                    }
                }
            }
            out.append('"');
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("bad JSON at " + at + ": " + what);
        }

        private void space() {
            while (at < text.length() && " \t\r\n".indexOf(text.charAt(at)) >= 0) at++;
        }

        private char peek() {
            if (at >= text.length()) throw error("unexpected end");
            return text.charAt(at);
        }

        private void expect(String word) {
            if (!text.startsWith(word, at)) throw error("expected " + word);
            at += word.length();
        }

        private Object value() {
            char c = peek();
            switch (c) {
                case '{': return object();
                case '[': return array();
                case '"': return string();
                case 't': expect("true"); return Boolean.TRUE;
                case 'f': expect("false"); return Boolean.FALSE;
                case 'n': expect("null"); return null;
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) return number();
                    throw error("unexpected " + c);
            }
        }

        private Map<String, Object> object() {
            Map<String, Object> map = new LinkedHashMap<>();
            at++;
            space();
            if (peek() == '}') { at++; return map; }
            while (true) {
                space();
                if (peek() != '"') throw error("expected a key");
                String key = string();
                space();
                if (peek() != ':') throw error("expected :");
                at++;
                space();
                map.put(key, value());
                space();
                char c = peek();
                at++;
                if (c == '}') return map;
                if (c != ',') throw error("expected , or }");
            }
        }

        private List<Object> array() {
            List<Object> list = new ArrayList<>();
            at++;
            space();
            if (peek() == ']') { at++; return list; }
            while (true) {
                space();
                list.add(value());
                space();
                char c = peek();
                at++;
                if (c == ']') return list;
                if (c != ',') throw error("expected , or ]");
            }
        }

        private String string() {
            StringBuilder out = new StringBuilder();
            at++;
            while (true) {
                char c = peek();
                at++;
                if (c == '"') return out.toString();
                if (c < 0x20) throw error("control character in string");
                if (c != '\\') { out.append(c); continue; }
                char e = peek();
                at++;
                switch (e) {
                    case '"' -> out.append('"');
                    case '\\' -> out.append('\\');
                    case '/' -> out.append('/');
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> {
                        if (at + 4 > text.length()) throw error("short \\u escape");
                        try {
                            out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        } catch (NumberFormatException bad) {
                            throw error("bad \\u escape");
                        }
                        at += 4;
                    }
                    default -> throw error("bad escape \\" + e);
                }
            }
        }

        private Number number() {
            int start = at;
            if (peek() == '-') at++;
            if (at < text.length() && text.charAt(at) == '0') at++;
            else digits();
            boolean integral = true;
            if (at < text.length() && text.charAt(at) == '.') { at++; digits(); integral = false; }
            if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
                at++;
                if (at < text.length() && (text.charAt(at) == '+' || text.charAt(at) == '-')) at++;
                digits();
                integral = false;
            }
            String n = text.substring(start, at);
            if (integral) {
                try {
                    return Long.parseLong(n);
                } catch (NumberFormatException tooBig) {
                    return Double.parseDouble(n);
                }
            }
            return Double.parseDouble(n);
        }

        private void digits() {
            int start = at;
            while (at < text.length() && Character.isDigit(text.charAt(at)) && text.charAt(at) < 128) at++;
            if (at == start) throw error("expected a digit");
        }
    }
}

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
        if ("1".equals(env.get("LEASEHOLD_SIGV4"))) worker.sigv4(Worker.SigV4.fromEnv("execute-api")); // a deployed API
        worker.run(() -> {
            System.out.println("ready");
            System.out.flush();
        });
        System.exit(0);
    }
}
