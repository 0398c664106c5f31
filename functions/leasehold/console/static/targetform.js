// "Call a URL": a job with no code (an HTTP target, README "Jobs with no code") submitted from
// the jobs page. The server checks the target (scheme, method, headers, SSRF, size) and its
// 422 names the field, which is shown as it is.

import { api } from "./api.js";
import { h, link, notify } from "./dom.js";
import { choice, field, parseJson, PRIORITIES, values } from "./forms.js";

const METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"].map((m) => [m, m]);

/** The request the form describes, as ``POST /jobs`` takes it. */
function targetOf(form) {
  const given = values(form);
  const http = { url: given.url || "", method: given.method || "POST" };
  const body = parseJson(given.body || "", "Body");
  if (body !== undefined) http.body = body;
  const headers = parseJson(given.headers || "", "Headers");
  if (headers !== undefined) http.headers = headers;
  if (given.timeout_seconds) http.timeout_seconds = Number(given.timeout_seconds);
  const job = { target: { http } };
  if (given.priority) job.priority = given.priority;
  if (given.max_attempts) job.max_attempts = Number(given.max_attempts);
  return job;
}

export function targetForm() {
  const form = h("form", { class: "filters", "aria-label": "call a URL" },
    field("URL", { name: "url", type: "url", required: true,
      placeholder: "https://api.partner.example/v1/orders" }),
    choice("Method", "method", METHODS),
    field("Body (JSON)", { name: "body", rows: 2, placeholder: '{"id": 7}' }),
    field("Headers (JSON)", { name: "headers", rows: 1,
      placeholder: '{"Content-Type": "application/json"}' }),
    field("Timeout (s)", { name: "timeout_seconds", type: "number", min: 1, max: 900 }),
    choice("Priority", "priority", PRIORITIES),
    field("Max attempts", { name: "max_attempts", type: "number", min: 1, max: 100 }),
    h("button", { type: "submit" }, "Call"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const job = await api("POST", "/jobs", { body: targetOf(form) });
      notify(h("span", {}, "Submitted ", link(`#/jobs/${job.job_id}`, job.job_id), "."));
      form.reset();
    } catch (error) {
      notify(error.message, "error");
    }
  });
  return h("details", { class: "panel submit" }, h("summary", {}, "Call a URL"), form);
}
