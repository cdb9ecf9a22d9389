"""`{{name}}`: a crewbox crew role in Python. It reviews the executor's diff read-only
and passes it unless the agent's reply starts with `FAIL`."""

from crewbox_stdio import guarded  # first: print() and errors go to the log

from wit_world import exports
from wit_world.imports import types


@guarded
class CrewRole(exports.CrewRole):
    def spec(self) -> types.RoleSpec:
        return types.RoleSpec(
            name="{{name}}",
            description="Reviews the diff and passes or lists findings.",
            access=types.Access.READ_ONLY,
            model_hint=None,
            turn_limit=10,
        )

    def prompt(self, context: types.RoleContext) -> str:
        return (
            f"Review this change for: {context.request}\n\n{context.diff or ''}\n\n"
            "Answer `PASS summary` or `FAIL finding; finding`."
        )

    def interpret(self, context: types.RoleContext, output: str) -> types.Outcome:
        text = output.strip()
        if text.startswith("FAIL"):
            findings = [f.strip() for f in text[4:].split(";") if f.strip()]
            return types.Outcome_Fail(findings)
        return types.Outcome_Pass(text)
