// Triggers: event patterns that submit a job for each matching event; create and delete.

import { api } from "./api.js";
import { button, confirmAction, h, json, notify, panel, replace, table, when } from "./dom.js";
import { choice, field, parseJson, PRIORITIES, values } from "./forms.js";

function createForm(done) {
  const form = h("form", { class: "filters stacked", "aria-label": "new trigger" },
    field("Name", { name: "name", placeholder: "orders placed" }),
    field("Task", { name: "task", placeholder: "e.g. echo", required: true }),
    field("Event pattern (JSON)", { name: "pattern", rows: 2, required: true,
      placeholder: '{"source": ["shop"]}' }),
    field("Input path", { name: "input_path", placeholder: "$.detail" }),
    field("Pool", { name: "pool", placeholder: "default" }),
    choice("Priority", "priority", PRIORITIES),
    h("button", { type: "submit" }, "Create trigger"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = values(form);
      body.pattern = parseJson(body.pattern || "", "the event pattern");
      const made = await api("POST", "/triggers", { body });
      notify(`Created trigger ${made.name} (${made.trigger_id}).`);
      form.reset();
      await done();
    } catch (error) {
      notify(error.message, "error");
    }
  });
  return form;
}

export async function render(main) {
  const list = h("div");
  async function load() {
    const answer = await api("GET", "/triggers");
    replace(list, table(["name", "pattern", "task", "input", "pool / priority", "created", ""],
      answer.triggers.map((t) => [
        h("span", {}, h("strong", {}, t.name), h("br"), h("span", { class: "muted mono" }, t.trigger_id)),
        json(t.pattern), t.task, h("code", {}, t.input_path), `${t.pool} / ${t.priority}`,
        when(t.created_at),
        button("Delete", async () => {
          if (!await confirmAction(`Delete trigger ${t.name}?`,
            "Matching events will no longer submit jobs. Jobs it already submitted stay.",
            "Delete trigger")) return;
          try {
            await api("DELETE", `/triggers/${t.trigger_id}`);
            notify(`Deleted trigger ${t.name}.`);
            await load();
          } catch (error) {
            notify(error.message, "error");
          }
        })]),
      "No triggers. Create one below, or with POST /triggers."));
  }
  replace(main, h("h1", {}, "Triggers"),
    h("p", { class: "muted" }, "Each event that matches a trigger's pattern (EventBridge on AWS, "
      + "POST /events locally) submits one job of its task."),
    list, panel("New trigger", createForm(load)));
  await load();
  return { refresh: load, every: 10000 };
}
