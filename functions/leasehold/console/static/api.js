// The JSON API, called at paths relative to this page (the root of `leasehold dev`, an API
// Gateway stage, or `leasehold console`), with the tenant the picker chose.

const TENANT_KEY = "leasehold.tenant";
const RECENT_KEY = "leasehold.tenants";

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(status ? `${status} ${code}: ${message}` : message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

export function tenant() {
  return localStorage.getItem(TENANT_KEY) || "";
}

export function recentTenants() {
  try {
    const list = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]");
    return Array.isArray(list) ? list.filter((t) => typeof t === "string") : [];
  } catch {
    return [];
  }
}

export function setTenant(value) {
  const name = value.trim();
  if (name) {
    localStorage.setItem(TENANT_KEY, name);
    const recent = [name, ...recentTenants().filter((t) => t !== name)].slice(0, 10);
    localStorage.setItem(RECENT_KEY, JSON.stringify(recent));
  } else {
    localStorage.removeItem(TENANT_KEY);
  }
}

function url(path, query) {
  // Relative ("jobs", not "/jobs"): under an API Gateway stage the page lives at /v1/.
  const target = new URL(path.replace(/^\//, ""), document.baseURI);
  for (const [key, value] of Object.entries(query || {})) {
    for (const item of [].concat(value)) {
      if (item !== undefined && item !== null && item !== "") {
        target.searchParams.append(key, item);
      }
    }
  }
  return target;
}

export async function api(method, path, { query, body } = {}) {
  // The custom header also tells `leasehold console` that the page itself sent the call: a
  // cross-site page cannot add it without a CORS preflight, which the proxy never grants.
  const headers = { Accept: "application/json", "X-Leasehold-Console": "1" };
  if (tenant()) headers["X-Leasehold-Tenant"] = tenant();
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url(path, query), init);
  } catch (error) {
    throw new ApiError(0, "unreachable", `cannot reach the API (${error.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = (data && data.error) || {};
    throw new ApiError(response.status, detail.code || "http_error",
      detail.message || text.slice(0, 200) || response.statusText, detail.field);
  }
  return data;
}

export const TERMINAL = new Set(["SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"]);
export const LIVE_STATES = ["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SLEEPING"];
export const STATES = [...LIVE_STATES, "SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"];
