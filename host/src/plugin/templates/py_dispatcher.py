"""`{{name}}`: a crewbox dispatcher in Python. It sends prompts that ask for a review
to the `crew` mode and everything else to one agent."""

from crewbox_stdio import guarded  # first: print() and errors go to the log

from wit_world import exports
from wit_world.imports import types


@guarded
class Dispatch(exports.Dispatch):
    def decide(self, request: types.DispatchRequest) -> types.DispatchDecision:
        review = "review" in request.prompt.lower()
        crew = review and types.Mode.CREW in request.available_modes
        signals = [types.Signal(name="review", detail="the prompt mentions a review")] if review else []
        return types.DispatchDecision(
            mode=types.Mode.CREW if crew else types.Mode.SINGLE,
            reason="review-requested" if crew else "default",
            swarm_size=None,
            tasks=[],
            signals=signals,
        )
