package leasehold;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * AWS Signature Version 4 with javax.crypto (no SDK): the headers to add to a request
 * (x-amz-date, x-amz-security-token when the credentials have one, authorization). It signs
 * host, x-amz-date, the token and the headers given; the path is used as given (the lease
 * protocol's paths need no escaping).
 */
public final class SigV4 {
    private final String accessKey, secretKey, sessionToken, region, service;

    public SigV4(String accessKey, String secretKey, String sessionToken, String region, String service) {
        this.accessKey = accessKey; this.secretKey = secretKey; this.sessionToken = sessionToken;
        this.region = region; this.service = service;
    }

    /** The same credentials and service, signing for another Region (a 421's home cell). */
    public SigV4 inRegion(String other) {
        return new SigV4(accessKey, secretKey, sessionToken, other, service);
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
