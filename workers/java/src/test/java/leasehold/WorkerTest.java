/*
 * Tests of the Java reference worker against a fake Leasehold API (com.sun.net.httpserver).
 * Run: workers/java/test.sh   (javac into a temporary directory, then java leasehold.WorkerTest)
 */
package leasehold;

import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.BooleanSupplier;

@SuppressWarnings("unchecked")
public final class WorkerTest {
    record Request(String path, Map<String, Object> body, long at) {}
    record Answer(int status, Object body, long delayMs, Map<String, String> headers) {
        Answer(int status, Object body, long delayMs) { this(status, body, delayMs, Map.of()); }
        static Answer ok(Object body) { return new Answer(200, body, 0); }
    }

    /** A fake API: records requests, answers through `script`. */
    static final class Fake implements AutoCloseable {
        final List<Request> requests = new CopyOnWriteArrayList<>();
        final HttpServer server;
        final String url;

        Fake(BiFunction<String, Map<String, Object>, Answer> script) throws Exception {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            server.setExecutor(java.util.concurrent.Executors.newCachedThreadPool());
            server.createContext("/", exchange -> {
                String raw = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
                Map<String, Object> body = (Map<String, Object>) Json.parse(raw);
                String path = exchange.getRequestURI().getPath();
                requests.add(new Request(path, body, System.currentTimeMillis()));
                Answer answer = script.apply(path, body);
                if (answer.delayMs() > 0) {
                    try { Thread.sleep(answer.delayMs()); } catch (InterruptedException e) { return; }
                }
                byte[] out = Json.write(answer.body()).getBytes(StandardCharsets.UTF_8);
                exchange.getResponseHeaders().add("content-type", "application/json");
                answer.headers().forEach(exchange.getResponseHeaders()::add);
                exchange.sendResponseHeaders(answer.status(), out.length);
                exchange.getResponseBody().write(out);
                exchange.close();
            });
            server.start();
            url = "http://127.0.0.1:" + server.getAddress().getPort();
        }

        List<Request> named(String suffix) {
            return requests.stream().filter(r -> r.path().endsWith(suffix)).toList();
        }

        @Override public void close() { server.stop(0); }
    }

    static Map<String, Object> job(String id, String task, Object payload, long leaseMs) {
        Map<String, Object> job = new LinkedHashMap<>();
        job.put("job_id", id);
        job.put("task", task);
        job.put("payload", payload);
        job.put("attempt", 1);
        job.put("tenant", "t1");
        job.put("deadline_at", null);
        job.put("lease", Map.of("token", "tok-" + id, "expires_at", Instant.now().plusMillis(leaseMs).toString()));
        return job;
    }

    /** The first lease request gets `jobs`; later ones get none after `emptyMs` (a short long poll). */
    static BiFunction<String, Map<String, Object>, Answer> leases(List<Object> jobs, long emptyMs,
            BiFunction<String, Map<String, Object>, Answer> rest) {
        AtomicBoolean given = new AtomicBoolean();
        return (path, body) -> {
            if (!path.equals("/workers/lease")) return rest.apply(path, body);
            if (!given.getAndSet(true)) return Answer.ok(Map.of("jobs", jobs));
            return new Answer(200, Map.of("jobs", List.of()), emptyMs);
        };
    }

    static BiFunction<String, Map<String, Object>, Answer> beats(boolean cancel) {
        return (path, body) -> path.endsWith("/heartbeat")
                ? Answer.ok(Map.of("expires_at", Instant.now().plusMillis(300).toString(), "cancel_requested", cancel))
                : Answer.ok(Map.of());
    }

    static Worker worker(Fake fake) {
        return new Worker(fake.url, "p", "w-java", 2, 1).log(message -> {});
    }

    static Thread start(Worker worker) {
        Thread thread = new Thread(() -> {
            try { worker.run(null); } catch (InterruptedException e) { throw new RuntimeException(e); }
        });
        thread.start();
        return thread;
    }

    static void until(BooleanSupplier condition, String what) throws InterruptedException {
        long ends = System.currentTimeMillis() + 5000;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > ends) throw new AssertionError("timed out waiting for " + what);
            Thread.sleep(20);
        }
    }

    static void check(boolean condition, String what) {
        if (!condition) throw new AssertionError(what);
    }

    static void equal(Object actual, Object expected) {
        if (!java.util.Objects.equals(actual, expected)) throw new AssertionError("expected " + expected + " but got " + actual);
    }

    // -- the tests ---------------------------------------------------------------------------

    static void jsonRoundTrip() {
        String text = "{\"s\":\"a\\\"b\\\\c\\n\\t\\u00e9\\ud83d\\ude00/\",\"n\":[0,-12,3.5,1e3,-0.25,12345678901234],"
                + "\"b\":[true,false,null],\"o\":{},\"a\":[],\"nested\":{\"x\":[{\"y\":\"\"}]}}";
        Map<String, Object> value = (Map<String, Object>) Json.parse(text);
        equal(value.get("s"), "a\"b\\c\n\té\uD83D\uDE00/");
        equal(value.get("n"), List.of(0L, -12L, 3.5, 1000.0, -0.25, 12345678901234L));
        equal(value.get("b"), Arrays.asList(true, false, null));
        equal(new ArrayList<>(value.keySet()), List.of("s", "n", "b", "o", "a", "nested"));
        equal(Json.parse(Json.write(value)), value);
        equal(Json.write(Map.of("c", "\u0001\u2028")), "{\"c\":\"\\u0001\\u2028\"}");
        equal(Json.write(List.of(1.0, 2.5, 3L)), "[1.0,2.5,3]");
        for (String bad : List.of("", "{", "[1,]", "{\"a\" 1}", "01", "\"\\x\"", "[1] 2", "tru", "\"a\nb\"", "-", "1.")) {
            try {
                Json.parse(bad);
                throw new AssertionError("parsed bad JSON " + bad);
            } catch (IllegalArgumentException expected) {
                // refused, as it should be
            }
        }
        try {
            Json.write(Double.NaN);
            throw new AssertionError("wrote NaN");
        } catch (IllegalArgumentException expected) {
            // refused
        }
    }

    /** AWS's SigV4 test suite, get-vanilla: GET / on example.amazonaws.com, 2015-08-30T12:36:00Z. */
    static void sigv4GetVanilla() {
        SigV4 signer = new SigV4("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", null,
                "us-east-1", "service");
        Map<String, String> headers = signer.sign("GET", java.net.URI.create("https://example.amazonaws.com/"), Map.of(),
                new byte[0], Instant.parse("2015-08-30T12:36:00Z"));
        equal(headers.get("x-amz-date"), "20150830T123600Z");
        equal(headers.get("authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
        Map<String, String> withToken = new SigV4("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "tok",
                "us-east-1", "service").sign("GET", java.net.URI.create("https://example.amazonaws.com/"), Map.of(),
                new byte[0], Instant.parse("2015-08-30T12:36:00Z"));
        equal(withToken.get("x-amz-security-token"), "tok");
        check(withToken.get("authorization").contains("SignedHeaders=host;x-amz-date;x-amz-security-token"), "the token is signed");
    }

    static void leaseThenComplete() throws Exception {
        try (Fake fake = new Fake(leases(List.of(job("j1", "add", Map.of("a", 2, "b", 3), 30_000)), 100, beats(false)))) {
            Worker worker = worker(fake).task("add", (payload, ctx) -> {
                Map<String, Object> p = (Map<String, Object>) payload;
                return Map.of("sum", (Long) p.get("a") + (Long) p.get("b"), "attempt", ctx.attempt);
            });
            Thread running = start(worker);
            until(() -> fake.named("/complete").size() == 1, "the complete");
            worker.stop();
            running.join(5000);
            check(!running.isAlive(), "run() returned after stop()");
            Map<String, Object> lease = fake.named("/workers/lease").get(0).body();
            equal(lease, Map.of("pool", "p", "tasks", List.of("add"), "max_jobs", 2L, "wait_seconds", 1L, "worker_id", "w-java",
                    "protocol", 1L));
            equal(fake.named("/complete").get(0).path(), "/jobs/j1/complete");
            equal(fake.named("/complete").get(0).body(), Map.of("token", "tok-j1", "result", Map.of("sum", 5L, "attempt", 1L)));
            equal(fake.named("/fail").size(), 0);
        }
    }

    static void heartbeatsWithProgress() throws Exception {
        try (Fake fake = new Fake(leases(List.of(job("j2", "slow", null, 300)), 100, beats(false)))) {
            Worker worker = worker(fake).task("slow", (payload, ctx) -> {
                Thread.sleep(200);
                ctx.progress(Map.of("done", 0.5));
                Thread.sleep(600);
                return "done";
            });
            Thread running = start(worker);
            until(() -> fake.named("/complete").size() == 1, "the complete");
            worker.stop();
            running.join(5000);
            List<Request> beats = fake.named("/heartbeat");
            check(beats.size() >= 4, "only " + beats.size() + " heartbeats for 800 ms on a 300 ms lease");
            check(beats.stream().allMatch(b -> b.body().get("token").equals("tok-j2")), "every beat carries the token");
            check(beats.stream().anyMatch(b -> Map.of("done", 0.5).equals(b.body().get("progress"))), "progress sent");
            long completed = fake.named("/complete").get(0).at();
            check(beats.stream().allMatch(b -> b.at() <= completed), "no beat after the finish");
        }
    }

    static void cancelRequested() throws Exception {
        try (Fake fake = new Fake(leases(List.of(job("j3", "wait", null, 300)), 100, beats(true)))) {
            AtomicBoolean returned = new AtomicBoolean();
            AtomicInteger sawCancel = new AtomicInteger();
            Worker worker = worker(fake).task("wait", (payload, ctx) -> {
                while (!ctx.sleep(5000)) { /* until cancelled */ }
                if ("cancel requested".equals(ctx.reason())) sawCancel.incrementAndGet();
                returned.set(true);
                return "finished anyway";
            });
            Thread running = start(worker);
            until(returned::get, "the task to return");
            Thread.sleep(300); // time for a wrongly sent finish to arrive
            worker.stop();
            running.join(5000);
            equal(sawCancel.get(), 1);
            equal(fake.named("/heartbeat").size(), 1);
            equal(fake.named("/complete").size() + fake.named("/fail").size(), 0);
        }
    }

    static void resultTooLarge() throws Exception {
        BiFunction<String, Map<String, Object>, Answer> refuse = (path, body) -> path.endsWith("/complete")
                ? new Answer(413, Map.of("error", Map.of("code", "payload_too_large", "message", "too large")), 0)
                : Answer.ok(Map.of("expires_at", Instant.now().plusMillis(30_000).toString(), "cancel_requested", false));
        try (Fake fake = new Fake(leases(List.of(job("j9", "big", null, 30_000)), 100, refuse))) {
            Worker worker = worker(fake).task("big", (payload, ctx) -> "x".repeat(1000));
            Thread running = start(worker);
            until(() -> fake.named("/fail").size() == 1, "the fallback fail");
            worker.stop();
            running.join(5000);
            equal(fake.named("/complete").size(), 1);
            equal(fake.named("/fail").get(0).body(), Map.of("token", "tok-j9", "retryable", false,
                    "error", Map.of("type", "PayloadTooLarge", "message", "the result is over the server's limit (413)")));
        }
    }

    static void leaseLostReportsNothing() throws Exception {
        BiFunction<String, Map<String, Object>, Answer> lost = (path, body) -> path.endsWith("/heartbeat")
                ? new Answer(409, Map.of("error", Map.of("code", "lease_lost", "message", "taken over")), 0)
                : Answer.ok(Map.of());
        try (Fake fake = new Fake(leases(List.of(job("j4", "wait", null, 300)), 100, lost))) {
            AtomicBoolean returned = new AtomicBoolean();
            AtomicInteger sawLost = new AtomicInteger();
            Worker worker = worker(fake).task("wait", (payload, ctx) -> {
                while (!ctx.sleep(5000)) { /* until the lease is lost */ }
                if ("lease lost".equals(ctx.reason())) sawLost.incrementAndGet();
                returned.set(true);
                return "a zombie's result";
            });
            Thread running = start(worker);
            until(returned::get, "the task to return");
            Thread.sleep(300); // time for a wrongly sent finish to arrive
            worker.stop();
            running.join(5000);
            equal(sawLost.get(), 1);
            equal(fake.named("/heartbeat").size(), 1);
            equal(fake.named("/complete").size() + fake.named("/fail").size(), 0);
        }
    }

    static class DiskFull extends Exception {
        private static final long serialVersionUID = 1L;
        DiskFull(String message) { super(message); }
    }

    static void errorsFail() throws Exception {
        List<Object> jobs = List.of(job("j5", "boom", Map.of("retry", true), 30_000), job("j6", "boom", Map.of("retry", false), 30_000));
        try (Fake fake = new Fake(leases(jobs, 100, beats(false)))) {
            Worker worker = worker(fake).task("boom", (payload, ctx) -> {
                if (Boolean.TRUE.equals(((Map<String, Object>) payload).get("retry"))) throw new DiskFull("no space");
                throw new Worker.NonRetryableException("bad input");
            });
            Thread running = start(worker);
            until(() -> fake.named("/fail").size() == 2, "two fails");
            worker.stop();
            running.join(5000);
            Map<String, Object> byPath = new LinkedHashMap<>();
            fake.named("/fail").forEach(r -> byPath.put(r.path(), r.body()));
            equal(byPath.get("/jobs/j5/fail"), Map.of("token", "tok-j5", "retryable", true,
                    "error", Map.of("type", "DiskFull", "message", "no space")));
            equal(byPath.get("/jobs/j6/fail"), Map.of("token", "tok-j6", "retryable", false,
                    "error", Map.of("type", "NonRetryableException", "message", "bad input")));
            equal(fake.named("/complete").size(), 0);
        }
    }

    static void sigtermDrains() throws Exception {
        Path log = Files.createTempFile("leasehold-java-drain", ".log");
        Path stdout = Files.createTempFile("leasehold-java-drain", ".out");
        List<Object> jobs = List.of(job("j8", "conformance.sleep", Map.of("seconds", 0.5, "log", log.toString()), 30_000));
        try (Fake fake = new Fake(leases(jobs, 1000, beats(false)))) {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            ProcessBuilder builder = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), "leasehold.Conformance")
                    .redirectError(ProcessBuilder.Redirect.INHERIT).redirectOutput(stdout.toFile());
            builder.environment().putAll(Map.of("LEASEHOLD_URL", fake.url, "LEASEHOLD_POOL", "p",
                    "LEASEHOLD_WORKER_ID", "w-drain", "LEASEHOLD_MAX_JOBS", "2", "LEASEHOLD_WAIT_SECONDS", "1"));
            Process child = builder.start();
            // The job runs and the worker's next long poll is held by the server: now SIGTERM it.
            until(() -> fake.named("/workers/lease").size() == 2 && read(log).contains("start j8"), "the job to start");
            long killedAt = System.currentTimeMillis();
            child.destroy(); // SIGTERM
            check(child.waitFor(10, TimeUnit.SECONDS), "the worker exited");
            equal(read(stdout), "ready\n");
            equal(child.exitValue(), 0);
            List<Request> completes = fake.named("/complete");
            equal(completes.size(), 1);
            equal(((Map<String, Object>) completes.get(0).body().get("result")).get("slept"), 0.5);
            check(completes.get(0).at() >= killedAt, "the job finished after SIGTERM, not cut short");
            check(read(log).contains("end j8 java w-drain"), "the task ran to its end");
            equal(fake.named("/workers/lease").size(), 2);
        } finally {
            new File(log.toString()).delete();
            new File(stdout.toString()).delete();
        }
    }

    static String read(Path path) {
        try { return Files.readString(path); } catch (Exception e) { return ""; }
    }

    /** AWS's SigV4 test suite, post-vanilla: POST / on example.amazonaws.com, 2015-08-30T12:36:00Z. */
    static void sigv4PostVanilla() {
        SigV4 signer = new SigV4("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", null, "us-east-1", "service");
        Instant at = Instant.parse("2015-08-30T12:36:00Z");
        URI uri = URI.create("https://example.amazonaws.com/");
        equal(signer.sign("POST", uri, Map.of(), new byte[0], at).get("authorization"),
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
    }

    /** A worker with a signer signs what it actually sends: the server recomputes the signature from the request it got. */
    static void signedRequests() throws Exception {
        SigV4 signer = new SigV4("AKIDEXAMPLE", "secret", "session-token", "eu-west-1", "execute-api");
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        List<String> problems = new CopyOnWriteArrayList<>();
        AtomicInteger seen = new AtomicInteger();
        server.createContext("/", exchange -> {
            byte[] body = exchange.getRequestBody().readAllBytes();
            var headers = exchange.getRequestHeaders();
            String stamp = headers.getFirst("x-amz-date");
            Instant at = java.time.LocalDateTime.parse(stamp, java.time.format.DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'"))
                    .toInstant(java.time.ZoneOffset.UTC);
            URI uri = URI.create("http://" + headers.getFirst("host") + exchange.getRequestURI().getRawPath());
            String expected = signer.sign(exchange.getRequestMethod(), uri,
                    Map.of("content-type", headers.getFirst("content-type")), body, at).get("authorization");
            if (!expected.equals(headers.getFirst("authorization"))) problems.add(headers.getFirst("authorization") + " != " + expected);
            if (!"session-token".equals(headers.getFirst("x-amz-security-token"))) problems.add("no session token");
            if (!expected.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,")) problems.add(expected);
            seen.incrementAndGet();
            byte[] out = "{\"expires_at\":\"2030-01-01T00:00:00Z\",\"cancel_requested\":false}".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, out.length);
            exchange.getResponseBody().write(out);
            exchange.close();
        });
        server.start();
        try {
            Worker worker = new Worker("http://127.0.0.1:" + server.getAddress().getPort(), "p", "w", 1, 0).sigv4(signer);
            worker.post("/jobs/j1/heartbeat", Map.of("token", "t \u00e9", "progress", 0.5), 5);
            worker.post("/workers/lease", Map.of("pool", "p"), 5);
            equal(seen.get(), 2);
            equal(problems, List.of());
        } finally {
            server.stop(0);
        }
    }

    interface Case { void run() throws Exception; }

    static void misdirectedRepoints() throws Exception {
        try (Fake home = new Fake(leases(List.of(job("j9", "add", Map.of("a", 1, "b", 1), 30_000)), 100, beats(false)));
             Fake elsewhere = new Fake((path, body) -> new Answer(421, Map.of("error", Map.of("code", "misdirected",
                     "message", "elsewhere", "home", "us-east-2", "home_url", home.url)), 0,
                     Map.of("Leasehold-Home-Url", home.url + "/")))) {
            Worker worker = worker(elsewhere).task("add", (payload, ctx) -> {
                Map<String, Object> p = (Map<String, Object>) payload;
                return (Long) p.get("a") + (Long) p.get("b");
            });
            Thread running = start(worker);
            until(() -> home.named("/complete").size() == 1, "the complete at the home");
            worker.stop();
            running.join(5000);
            equal(elsewhere.requests.stream().map(Request::path).toList(), List.of("/workers/lease"));
            equal(home.named("/workers/lease").get(0).body().get("pool"), "p");
            equal(home.named("/complete").get(0).body(), Map.of("token", "tok-j9", "result", 2L));
            equal(worker.url, home.url);
        }
    }

    public static void main(String[] args) {
        Map<String, Case> cases = new LinkedHashMap<>();
        cases.put("json round trip", WorkerTest::jsonRoundTrip);
        cases.put("sigv4 get-vanilla", WorkerTest::sigv4GetVanilla);
        cases.put("sigv4 post-vanilla", WorkerTest::sigv4PostVanilla);
        cases.put("sigv4 signs what is sent", WorkerTest::signedRequests);
        cases.put("lease -> complete", WorkerTest::leaseThenComplete);
        cases.put("heartbeats with progress", WorkerTest::heartbeatsWithProgress);
        cases.put("cancel requested -> nothing reported", WorkerTest::cancelRequested);
        cases.put("413 on complete -> PayloadTooLarge fail", WorkerTest::resultTooLarge);
        cases.put("409 lease_lost -> nothing reported", WorkerTest::leaseLostReportsNothing);
        cases.put("errors -> fail", WorkerTest::errorsFail);
        cases.put("SIGTERM drains, exit 0", WorkerTest::sigtermDrains);
        cases.put("421 misdirected -> re-pointed to its home", WorkerTest::misdirectedRepoints);
        int failed = 0;
        for (Map.Entry<String, Case> c : cases.entrySet()) {
            long started = System.nanoTime();
            try {
                c.getValue().run();
                System.out.printf("ok   %s (%d ms)%n", c.getKey(), (System.nanoTime() - started) / 1_000_000);
            } catch (Throwable e) {
                failed++;
                System.out.printf("FAIL %s: %s%n", c.getKey(), e);
                e.printStackTrace(System.out);
            }
        }
        System.out.println(failed == 0 ? "all " + cases.size() + " passed" : failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
