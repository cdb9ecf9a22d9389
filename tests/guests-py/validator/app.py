"""A crewbox validator written in Python, built into a component with componentize-py.

It checks an agent's result against simple criteria, one per string:

- ``reply-nonempty``: the agent's reply is not blank (the default criterion);
- ``reply-contains:TEXT``: the reply contains TEXT;
- ``file-exists:PATH``: PATH can be read from the workspace;
- ``file-contains:PATH:TEXT``: the file at PATH contains TEXT;
- ``changed:PATH``: the agent changed PATH.

An unknown criterion kind is an ``err`` (the validator cannot judge), not a failed
verdict. Workspace errors are reported by their WIT case name so a host test can see
exactly what the host answered.
"""

from typing import List

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log, types, workspace

DEFAULT_CRITERIA = ["reply-nonempty"]


def _fs_error(e: workspace.FsError) -> str:
    """Spells a workspace error the way the WIT does."""
    names = {
        workspace.FsError_NotFound: "not-found",
        workspace.FsError_OutsideWorkspace: "outside-workspace",
        workspace.FsError_TooLarge: "too-large",
        workspace.FsError_NotText: "not-text",
        workspace.FsError_Io: "io",
    }
    return f"{names.get(type(e), 'unknown')}:{e.value}"


def _read(path: str):
    """Returns (text, None) or (None, error description)."""
    try:
        return workspace.read_file(path), None
    except Err as e:
        return None, _fs_error(e.value)


def _check(criterion: str, output: types.AgentOutput) -> types.CriterionResult:
    kind, _, arg = criterion.partition(":")
    if kind == "reply-nonempty":
        ok = bool(output.reply.strip())
        detail = "reply is not empty" if ok else "reply is empty"
    elif kind == "reply-contains":
        ok = arg in output.reply
        detail = f"reply {'contains' if ok else 'does not contain'} {arg!r}"
    elif kind == "file-exists":
        _, err = _read(arg)
        ok = err is None
        detail = f"{arg} exists" if ok else err
    elif kind == "file-contains":
        path, _, needle = arg.partition(":")
        text, err = _read(path)
        ok = text is not None and needle in text
        if err is not None:
            detail = err
        else:
            detail = f"{path} {'contains' if ok else 'does not contain'} {needle!r}"
    elif kind == "changed":
        changed = {c.path for c in workspace.changed_paths()}
        ok = arg in changed
        detail = f"{arg} {'was' if ok else 'was not'} changed"
    else:
        raise Err(f"unknown criterion kind {kind!r} in {criterion!r}")
    return types.CriterionResult(criterion=criterion, passed=ok, detail=detail)


class Validate(exports.Validate):
    """The exported `validate` interface."""

    def describe(self) -> types.ValidatorInfo:
        return types.ValidatorInfo(
            name="py-criteria",
            description="Checks replies and workspace files against simple criteria (Python).",
            default_criteria=list(DEFAULT_CRITERIA),
        )

    def validate(self, output: types.AgentOutput, criteria: List[str]) -> types.Verdict:
        criteria = criteria or list(DEFAULT_CRITERIA)
        results = [_check(c, output) for c in criteria]
        passed = all(r.passed for r in results)
        failed = [r for r in results if not r.passed]
        fix_prompt = None
        if failed:
            fix_prompt = "Fix the following before finishing:\n" + "\n".join(
                f"- {r.criterion}: {r.detail}" for r in failed
            )
        log.log(log.Level.INFO, f"py-criteria: {len(results) - len(failed)}/{len(results)} passed")
        return types.Verdict(passed=passed, results=results, fix_prompt=fix_prompt)
