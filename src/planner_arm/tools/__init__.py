"""The caller's tools: the rule-based plan over a request's tool set, and everything a tool set
is read by (what each tool needs and yields, how words name tools, the tool graph and the
worked examples, the review of a model's tool plan, a tool step's arguments). It imports
`plan/` and the shared modules only, and nothing below it imports it."""
