// `{{name}}`: a crewbox validator in JavaScript. It fails when the agent's reply still
// says `TODO` and when a file it needs is missing from the agent's workspace.
//
// Criteria (one string each; none given means the defaults in `describe`):
// - `no-todo`: the reply does not contain `TODO`;
// - `file:PATH`: PATH can be read in the workspace (read-only, relative to its root).
//
// Throwing a string answers `err` (this validator cannot judge); a failed check is a
// verdict with `passed: false`.

import { readFile } from "crewbox:plugin/workspace@0.1.0";

const DEFAULTS = ["no-todo", "file:README.md"];

function check(criterion, output) {
  if (criterion === "no-todo") {
    const ok = !output.reply.includes("TODO");
    return { criterion, passed: ok, detail: ok ? "no TODO" : "the reply says TODO" };
  }
  if (criterion.startsWith("file:")) {
    const path = criterion.slice(5);
    try {
      const text = readFile(path);
      return { criterion, passed: true, detail: `${text.length} characters` };
    } catch (e) {
      return { criterion, passed: false, detail: `${e.payload?.tag ?? "error"}: ${e.payload?.val ?? e}` };
    }
  }
  throw `unknown criterion \`${criterion}\``;
}

export const validate = guarded({
  describe() {
    return { name: "{{name}}", description: "The reply has no TODO and the files it needs exist.", defaultCriteria: DEFAULTS };
  },
  validate(output, criteria) {
    const results = (criteria.length ? criteria : DEFAULTS).map((c) => check(c, output));
    log("debug", `checked ${results.length} criteria`);
    const passed = results.every((r) => r.passed);
    return { passed, results, fixPrompt: passed ? undefined : "Finish the TODOs in your reply and create the files the task needs." };
  },
});
