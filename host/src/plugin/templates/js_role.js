// `{{name}}`: a crewbox crew role in JavaScript. It reviews the executor's diff
// read-only and passes it unless the agent's reply starts with `FAIL`.

export const crewRole = guarded({
  spec() {
    return {
      name: "{{name}}",
      description: "Reviews the diff and passes or lists findings.",
      access: "read-only",
      modelHint: undefined,
      turnLimit: 10,
    };
  },
  prompt(context) {
    return `Review this change for: ${context.request}\n\n${context.diff ?? ""}\n\n` +
      "Answer `PASS summary` or `FAIL finding; finding`.";
  },
  interpret(context, output) {
    const text = output.trim();
    if (text.startsWith("FAIL")) {
      const findings = text.slice(4).split(";").map((s) => s.trim()).filter((s) => s);
      return { tag: "fail", val: findings };
    }
    return { tag: "pass", val: text };
  },
});
