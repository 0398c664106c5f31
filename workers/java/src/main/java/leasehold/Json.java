package leasehold;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A small, strict JSON reader and writer: objects are LinkedHashMaps, arrays Lists, numbers Long or Double. */
public final class Json {
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
