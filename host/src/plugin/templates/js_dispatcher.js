// `{{name}}`: a crewbox dispatcher in JavaScript. It sends prompts that ask for a
// review to the `crew` mode and everything else to one agent.

export const dispatch = guarded({
  decide(request) {
    const review = request.prompt.toLowerCase().includes("review");
    const crew = review && request.availableModes.includes("crew");
    return {
      mode: crew ? "crew" : "single",
      reason: crew ? "review-requested" : "default",
      swarmSize: undefined,
      tasks: [],
      signals: review ? [{ name: "review", detail: "the prompt mentions a review" }] : [],
    };
  },
});
