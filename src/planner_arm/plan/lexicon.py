"""Text as the rule-based choosers read it: words, a light stemmer, a phrase lexicon, and the
built-in word tables.

Shared by the arm resolver (`arms.py`), the quality checks and the rule-based planner, which all
match words and phrases of free text against weighted tables. A step is read as a verb frame:
what it *does* (its leading verb, `VERBS_BY_ARM`) and what it does it to or produces (its
object, `OBJECTS_BY_ARM`). Running a command or a command-line tool is the executor's;
producing a written artefact (code, a document, a schema, a table, an answer) is the coder's;
checking against criteria is the judge's; privacy, secrets, confidentiality and policy are the
guardian's (its object words win over a checking, finding or generic verb); finding and
gathering information is the retriever's; decomposing work and deciding between options is
the planner's.
"""

from __future__ import annotations

from collections.abc import Iterator

from planner_arm.text import stem, word_set, words


def phrases(text: str) -> tuple[str, ...]:
    return tuple(phrase.strip() for phrase in text.split(","))


# A word that matches only after stemming ("tests" against "test") counts a little less, so
# the arm that named the exact form wins a tie between two arms that share a stem.
STEM_ONLY = 0.85

# A term: its stems, its words as written, its label and its weight. A plain tuple of
# strings, numbers and such tuples, which the garbage collector stops tracking once it has
# seen it, so a large lexicon (a caller's tool set) does not lengthen every collection.
_Term = tuple[tuple[str, ...], tuple[str, ...], int, float]


class Lexicon:
    """Words and phrases that each point at a label (an arm, a kind of goal) with a weight.

    Matching is by stems, longest phrase first; a match of the stem but not the exact words
    counts `STEM_ONLY` as much. Build it once, then `scan` each text.
    """

    def __init__(self) -> None:
        self._terms: dict[tuple[int, tuple[str, ...]], _Term] = {}
        self._index: dict[str, tuple[_Term, ...]] | None = None
        # One copy of each word sequence, however many labels' terms hold it.
        self._sequences: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._sealed = False

    def add(self, label: int, text: str, weight: float) -> None:
        if self._sealed:
            raise RuntimeError("a sealed lexicon takes no more terms")
        exact = tuple(words(text))
        if not exact:
            return
        one = self._sequences.setdefault
        stems = tuple(stem(w) for w in exact)
        key = (label, one(stems, stems))
        if key in self._terms and self._terms[key][3] >= weight:
            return
        self._terms[key] = (key[1], one(exact, exact), label, weight)
        self._index = None

    def _build(self) -> dict[str, tuple[_Term, ...]]:
        by_first: dict[str, list[_Term]] = {}
        for term in self._terms.values():
            by_first.setdefault(term[0][0], []).append(term)
        # Tuples, longest phrase first: the collector stops tracking them too.
        index = {
            first: tuple(sorted(terms, key=lambda term: -len(term[0])))
            for first, terms in by_first.items()
        }
        self._index = index
        return index

    def sealed(self) -> Lexicon:
        """This lexicon with every term added: its index built now and the table it was
        built from let go (half the memory); it is only read from here on, by any thread."""
        self._build()
        self._terms = {}
        self._sequences = {}
        self._sealed = True
        return self

    def scan(self, tokens: list[str], stems: list[str]) -> Iterator[tuple[int, dict[int, float]]]:
        """Each match in the text: its position and each label's weight, left to right.

        At each position the longest phrase wins and the words inside it are not matched again.
        """
        i = 0
        while i < len(stems):
            length, hits = self.match(tokens, stems, i)
            if length:
                yield i, hits
                i += length
            else:
                i += 1

    def match(self, tokens: list[str], stems: list[str], i: int) -> tuple[int, dict[int, float]]:
        """The longest phrase starting at `i` (its length in words) and each label's weight."""
        index = self._index if self._index is not None else self._build()
        length = 0
        hits: dict[int, float] = {}
        for term_stems, exact, label, term_weight in index.get(stems[i], ()):
            size = len(term_stems)
            if size < length:
                break
            if tuple(stems[i : i + size]) != term_stems:
                continue
            length = size
            weight = term_weight
            if tuple(tokens[i : i + size]) != exact:
                weight *= STEM_ONLY
            hits[label] = max(hits.get(label, 0.0), weight)
        return length, hits


# Verbs that say little about the kind of work: at the head they count as any other word, so
# the object decides ("Write the project plan" is planning, "Write the summary" is writing).
GENERIC_VERBS = word_set(
    "write create add make generate produce prepare draft update build do perform handle "
    "complete get set use identify determine analyse analyze improve work define take deal "
    "sort go look design"
)
# Words before the verb that carry no meaning for the choice ("Then, run ...", "Step 2: ...").
LEAD_FILLERS = word_set(
    "then please first next finally also now step re and to we i let lets us should will "
    "must carefully quickly thoroughly again manually automatically initially lastly once"
)
# Verbs that check, look for or judge something: when the object is a guardian topic
# ("Check the repository for leaked API keys"), the guardian gets the verb's weight too.
SCREENING_VERBS = word_set(
    "validate verify check review confirm assess evaluate inspect audit examine scan screen "
    "test ensure make sure look find search detect flag vet decide classify go"
)

# What a step does: its verb. Phrasal verbs are phrases; the longest match wins.
VERBS_BY_ARM: dict[str, tuple[str, ...]] = {
    "planner": phrases(
        "replan, re plan, break down, break, split, decompose, prioritise, prioritize, sequence, "
        "order, schedule, outline, estimate, allocate, assign, delegate, coordinate, organise, "
        "organize, triage, map out, lay out, draw up, work out, budget, group, structure, "
        "choose, pick, select, decide, weigh, scope, turn into"
    ),
    "retriever": phrases(
        "search, find, find out, look up, look for, look into, locate, gather, collect, "
        "research, read, survey, retrieve, fetch, explore, investigate, consult, browse, "
        "dig through, dig into, discover, learn, query, compile a list"
    ),
    "coder": phrases(
        "implement, code, refactor, debug, fix, patch, port, rewrite, modify, edit, develop, "
        "draft, summarise, summarize, answer, convert, document, optimise, optimize, translate, "
        "add, create, update, change"
    ),
    "executor": phrases(
        "run, execute, deploy, install, compile, lint, grep, curl, ssh, tail, launch, start, "
        "restart, provision, upload, download, push, publish, ship, release, roll back, "
        "rollback, roll out, trigger, kick off, invoke, call, apply, back up, restore, reindex, "
        "load, scale, scrape, crawl, send, measure, benchmark, kubectl, reproduce, migrate, "
        "compute, calculate, aggregate, monitor, profile, set up, setup, configure, delete, post"
    ),
    "judge": phrases(
        "verify, validate, check, confirm, test that, test whether, assess, evaluate, review, "
        "inspect, audit, double check, cross check, fact check, proofread, grade, score, qa, "
        "approve, sign off, compare, make sure, ensure, judge, go over, examine"
    ),
    "guardian": phrases(
        "redact, mask, anonymise, anonymize, pseudonymise, pseudonymize, sanitise, sanitize, "
        "encrypt, scan, screen, vet, moderate, rotate"
    ),
}

# What a step works on or produces: its object.
OBJECTS_BY_ARM: dict[str, tuple[str, ...]] = {
    "planner": phrases(
        "plan, project plan, roadmap, milestone, phase, timeline, priorities, order, sequence, "
        "steps, subtasks, work packages, workstreams, stages, critical path, scope, effort, "
        "trade offs, tradeoffs, options, approach, strategy, user stories, epic, sprint, "
        "iteration, backlog, hand off, in parallel, concurrently"
    ),
    "retriever": phrases(
        "documentation, docs, wiki, literature, sources, references, knowledge base, glossary, "
        "rfc, prior work, prior art, examples, background, articles, requirements, findings"
    ),
    "coder": phrases(
        "feature, library, component, handler, parser, middleware, regex, rest, frontend, "
        "backend, ui, crash, error handling, exception, type hints, docstring, readme, "
        "changelog, release notes, test case, unit tests, regression test, integration test, "
        "add tests, write tests, sql, dockerfile, "
        "summary, report, memo, document, design document, user guide, guide, answer, e mail, "
        "email, table, markdown, python, typescript, javascript, json schema, flag, retry, "
        "lint warnings, compile error"
    ),
    "executor": phrases(
        "staging, production, server, container, docker image, image, cluster, pods, pipeline, "
        "ci, suite, test suite, smoke tests, job, notebook, instance, docker, kubernetes, "
        "replicas, registry, artefacts, artifacts, command, terraform, make, pytest, pip, "
        "dataset, warehouse, latency, load test, database migration"
    ),
    "judge": phrases(
        "criteria, acceptance, acceptance criteria, rubric, expected, expected results, "
        "constraints, correctness, completeness, accuracy, consistency, consistent, quality, "
        "regressions, results, target, matches, match, agree, add up, style guide, duplicates, "
        "relevance, errors, meets, succeeded, green"
    ),
    "guardian": phrases(
        "pii, phi, personal data, personal information, privacy, secret, secrets, password, "
        "passwords, credential, credentials, token, tokens, api key, api keys, confidential, "
        "confidentiality, policy, compliance, complies, comply, gdpr, hipaa, consent, licence, "
        "license, security, vulnerability, xss, csrf, injection, exfiltration, harmful, "
        "unsafe, toxic, leak, leaked, least privilege, permission, permissions, "
        "sensitive, customer data, acceptable use, credit card, e mail addresses, exposure, "
        "encryption, access control, cve, malware, moderation"
    ),
}
