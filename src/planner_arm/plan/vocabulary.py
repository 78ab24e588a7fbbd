"""The built-in word tables of the rule-based arm selector: verbs, fillers, and the words
that point at each of the six standard arms beyond what their configured keywords say."""

from __future__ import annotations

from planner_arm.plan.lexicon import phrases, word_set

GENERIC_VERBS = word_set(
    "write create add make generate produce prepare draft update build do perform handle "
    "complete ensure get set use identify determine analyse analyze improve work"
)
# Words before the verb that carry no meaning for the choice ("Then, run ...", "Step 2: ...").
LEAD_FILLERS = word_set(
    "then please first next finally also now step re and to we i let lets us should will "
    "must carefully quickly thoroughly again manually automatically initially lastly once"
)
# Checking verbs: both the judge and the guardian check things. When what is checked is a
# safety matter ("Review the pull request for security issues"), the guardian is the specialist
# and gets the verb's weight too; otherwise the tie goes to the judge, as the tree orders them.
CHECK_VERBS = word_set(
    "validate verify check review confirm assess evaluate inspect audit examine scan screen test"
)

# Words for the six standard arms that the seed's keyword lists miss, applied only to arms of
# these ids that are configured. A phrase beats the single words inside it, so "release notes"
# is writing (coder), not a release (executor), and "test case" is code, not validation.
VOCABULARY_BY_ARM: dict[str, tuple[str, ...]] = {
    "coder": phrases(
        "add, create, update, modify, change, rewrite, develop, edit, optimise, optimize, "
        "test case, regression test, integration test, add tests, write tests, feature, "
        "library, component, handler, parser, rest, frontend, backend, ui, crash, "
        "error handling, exception, type hints, lint, document, documentation, docs, docstring, "
        "readme, changelog, release notes, python, typescript, javascript, sql schema"
    ),
    "retriever": phrases(
        "summarise, summarize, summary, synthesise, synthesize, findings, report, investigate, "
        "look into, find out, learn, understand, discover, browse, consult, knowledge base, "
        "literature, sources, references, compare"
    ),
    "executor": phrases(
        "publish, ship, apply, invoke, trigger, reproduce, staging, production, server, "
        "container, docker, kubernetes, cluster, pipeline, scrape, crawl, compute, calculate, "
        "aggregate, load, data, dataset, csv, monitor, profile, set up, setup, configure, "
        "suite, smoke test, rollback, roll back, scale, backup, restore, migrate, delete, send, "
        "post"
    ),
    "judge": phrases(
        "constraint, criteria, acceptance, correctness, quality, accuracy, consistency, grade, "
        "score, sign off, results, meets, expected, qa, proofread, double check, examine, "
        "audit, regressions"
    ),
    "guardian": phrases(
        "scan, screen, leak, exposure, personal data, sensitive, encrypt, encryption, "
        "access control, injection, xss, csrf, cve, malware, harmful, toxic, moderate, "
        "moderation, mask, anonymise, anonymize, consent, hipaa, risk, unsafe"
    ),
    "planner": phrases(
        "order, sequence, roadmap, milestone, estimate, scope, approach, choose, select, pick, "
        "weigh, tradeoffs, trade offs, options, allocate, assign, delegate, organise, organize, "
        "timeline, phase, steps"
    ),
}

STOPWORDS = word_set(
    "a an the and or of to for in on at by as is are be it its this that with from into "
    "between then than every all each any other up down out over"
)
