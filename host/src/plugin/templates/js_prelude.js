import { log } from "crewbox:plugin/log@0.1.0";

// QuickJS has no `console`; this one writes to the crewbox log.
const text = (args) => args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
globalThis.console = Object.fromEntries(
  ["debug", "info", "warn", "error"].map((level) => [level, (...a) => log(level, text(a))]),
);
console.log = console.info;

// An error thrown out of an export is logged with its stack before the plugin fails
// (a validator's thrown string stays its `err` answer: "cannot judge").
function guarded(exports) {
  for (const [name, f] of Object.entries(exports)) {
    exports[name] = (...args) => {
      try {
        return f(...args);
      } catch (e) {
        if (typeof e !== "string") {
          const stack = (e?.stack ?? "").trim().split("\n").join(" | ");
          log("error", `${e?.name ?? "Error"}: ${e?.message ?? e}${stack ? ` | ${stack}` : ""}`);
        }
        throw e;
      }
    };
  }
  return exports;
}
