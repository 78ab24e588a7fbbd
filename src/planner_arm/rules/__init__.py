"""The rule-based planner: plans, sub-plans, replans and step inputs made without a model, for
when no model is configured or the model fails. Pure, no I/O; imports plan/ only."""
