"""`{{name}}`: a crewbox validator in Python. It fails when the agent's reply still says
`TODO` and when a file it needs is missing from the agent's workspace.

Criteria (one string each; none given means the defaults in `describe`):
- `no-todo`: the reply does not contain `TODO`;
- `file:PATH`: PATH can be read in the workspace (read-only, relative to its root).
"""

from crewbox_stdio import guarded  # first: print() and errors go to the log

from typing import List

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types, workspace

DEFAULT_CRITERIA = ["no-todo", "file:README.md"]


def _check(criterion: str, output: types.AgentOutput) -> types.CriterionResult:
    if criterion == "no-todo":
        ok = "TODO" not in output.reply
        detail = "no TODO" if ok else "the reply says TODO"
    elif criterion.startswith("file:"):
        path = criterion[len("file:"):]
        try:
            text = workspace.read_file(path)
            ok, detail = True, f"{len(text)} characters"
        except Err as e:
            kind = type(e.value).__name__.removeprefix("FsError_")
            ok, detail = False, f"{kind}: {e.value.value}"
    else:
        # Not a failed check: this validator cannot judge it.
        raise Err(f"unknown criterion `{criterion}`")
    print(f"{criterion}: {ok}")
    return types.CriterionResult(criterion=criterion, passed=ok, detail=detail)


@guarded
class Validate(exports.Validate):
    def describe(self) -> types.ValidatorInfo:
        return types.ValidatorInfo(
            name="{{name}}",
            description="The reply has no TODO and the files it needs exist.",
            default_criteria=list(DEFAULT_CRITERIA),
        )

    def validate(self, output: types.AgentOutput, criteria: List[str]) -> types.Verdict:
        results = [_check(c, output) for c in criteria or DEFAULT_CRITERIA]
        passed = all(r.passed for r in results)
        fix = None if passed else "Finish the TODOs in your reply and create the files the task needs."
        return types.Verdict(passed=passed, results=results, fix_prompt=fix)
