"""Reading a goal for the rule-based planner: its kind, its subject, its parts, and the
specifics it names.

`classify_goal` names the kind of goal from cue words, `goal_subject` pulls out a short phrase
for what it is about, and `goal_parts` cuts a compound goal ("build X, then deploy it to
staging") into the parts to plan in order, each with its own kind. `goal_details` finds by
pattern the environments, versions, files and paths, URLs and ticket ids a goal names, so the
planner puts each where it belongs (the environment in the deploy step, the file in the search
and fix steps).
"""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from planner_arm.plan.lexicon import GENERIC_VERBS, LEAD_FILLERS, Lexicon
from planner_arm.rules.templates import kinds
from planner_arm.text import stem, word_set, words

SUBJECT_WORDS, SUBJECT_CHARS = 8, 64
MAX_PARTS = 3

_QUESTION = word_set("what why how which who when where should does do is are can could")
# Words dropped from the front of a goal before its subject: fillers, one verb, determiners.
_LEADING = _QUESTION | word_set(
    "please kindly would will you we i need needs want to help me us let's lets let must was "
    "were there it be go and then first now also just quickly urgently asap task goal todo"
)
_DETERMINERS = word_set("the a an our my your their its this that these those some all any")
_VERBS = word_set(
    "fix add implement build create write develop make research investigate analyse analyze "
    "deploy release ship document review audit check find compare explore study evaluate assess "
    "design plan refactor update upgrade migrate set install configure debug resolve repair "
    "improve optimise optimize test verify validate secure scan summarise summarize explain "
    "draft prepare generate integrate support enable run execute launch provision roll publish "
    "remove clean speed learn understand look figure identify estimate measure report gather "
    "search read translate rewrite extend harden patch diagnose monitor decide choose get do"
)
_PARTICLES = word_set("up out down into over through")
_JOINERS = word_set("and then also plus &")
_CUTS = word_set(
    "for to so because without while using via before after by when if unless reported seen "
    "described mentioned raised filed logged found"
)
_TRAILING = _DETERMINERS | _CUTS | _JOINERS | word_set("of in on at with")
# "documentation for the CLI" is about the CLI: such a head is dropped before a cut word.
_GENERIC_HEADS = _DETERMINERS | word_set(
    "documentation docs doc guide tutorial readme manual tests test unit support report "
    "analysis review audit deployment overview summary research study fix patch feature plan new"
)
DOC_NOUNS = word_set("documentation docs doc guide tutorial readme manual notes changelog wiki")
CLAUSE_END = re.compile(r"[.!?;:]+(?=\s|$)|[\n;,(\[]|\s[-–—]+\s")
_EDGE = re.compile(r"^\W+|\W+$")


# Where a compound goal's parts meet: "then", "after that", a new sentence; and ", and" or
# "and" before a verb, where the two sides are different kinds of work.
_THEN = re.compile(
    r"[.!?;]+\s+|\n+|,?\s+(?:and\s+)?then\b,?\s*"
    r"|,?\s+(?:after that|afterwards|finally|once (?:that is |it is )?(?:done|finished))\b,?\s*",
    re.IGNORECASE,
)
_AND = re.compile(r",\s+(?:and\s+)?|\s+and\s+", re.IGNORECASE)
_TEST_WORDS = word_set("test tests testing unit integration regression e2e coverage")
_BACK = word_set("it them this that these those everything result results change changes")


class GoalPart(NamedTuple):
    """One part of a goal: its text, its kind, and its subject ("" when it names none of its
    own, as in "then deploy it", so it is about what the part before produced)."""

    text: str
    kind: str
    subject: str


def goal_parts(goal: str) -> list[GoalPart]:
    """The goal's parts in order (at most `MAX_PARTS`); a goal of one kind of work is one part.

    A piece joins the part before it when it is the same kind of work, or only adds tests
    ("fix the bug and add tests": the bug-fix plan writes tests anyway).
    """
    text = goal[:1000]
    spans = _pieces(text)
    if len(spans) == 1:
        return [GoalPart(goal, classify_goal(goal), goal_subject(goal))]
    found = _grouped(text, spans)
    if len(found) <= 1:
        return [GoalPart(goal, classify_goal(goal), goal_subject(goal))]
    parts: list[GoalPart] = []
    for start, end, first_end, kind in found:
        subject = goal_subject(text[start:first_end])
        parts.append(
            GoalPart(text[start:end], kind, "" if parts and _refers_back(subject) else subject)
        )
    return parts


def _pieces(text: str) -> list[tuple[int, int]]:
    """The spans between the places where a compound goal's parts may meet."""
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in [*_THEN.finditer(text), None]:
        end = cut.start() if cut else len(text)
        spans.extend(_split_at_verbs(text, start, end))
        start = cut.end() if cut else end
    return spans


def _grouped(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int, int, str]]:
    """The pieces joined into parts: each part's start, its end, its first piece's end, kind."""
    found: list[tuple[int, int, int, str]] = []
    for start, end in (span for span in spans if has_word(text[span[0] : span[1]])):
        piece = text[start:end]
        if found and (len(found) == MAX_PARTS or _only_tests(piece)):
            found[-1] = (*found[-1][:1], end, *found[-1][2:])
            continue
        kind = classify_goal(piece)
        if found and kind == found[-1][3]:
            found[-1] = (*found[-1][:1], end, *found[-1][2:])
        else:
            found.append((start, end, end, kind))
    return found


def _split_at_verbs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    for cut in _AND.finditer(text, start, end):
        following = words(text[cut.end() : cut.end() + 30])
        if following and following[0] in _VERBS:
            spans.append((start, cut.start()))
            start = cut.end()
    return [*spans, (start, end)]


def _only_tests(piece: str) -> bool:
    found = set(words(piece)) - _VERBS - _LEADING - _DETERMINERS - _BACK - word_set("for cover")
    return bool(found) and found <= _TEST_WORDS


def _refers_back(subject: str) -> bool:
    """Whether a later part's subject is no subject: "it", or only a place or version."""
    if words(subject)[:1] and words(subject)[0] in _TRAILING:  # "(deploy it) to staging"
        return True
    found = set(words(subject)) - _DETERMINERS
    named = {word for detail in goal_details(subject).all() for word in words(detail)}
    return not found or found <= _BACK | named


def classify_goal(goal: str) -> str:
    """The kind of goal ("bug_fix", "feature", ...; see TEMPLATES), "generic" if no cue fits."""
    tokens = words(goal[:2000])[:200]
    stems = [stem(token) for token in tokens]
    table, lexicon, skip, generic_verbs = kinds(), *_kind_lexicon()
    head = next((i for i, s in enumerate(stems[:6]) if s not in skip), -1)
    scores = dict.fromkeys(range(len(table)), 0.0)
    for i, hits in lexicon.scan(tokens, stems):
        factor = 3.0 if i == head and stems[i] not in generic_verbs else 1.0
        for kind, weight in hits.items():
            scores[kind] += weight * factor
    if goal.rstrip().endswith("?") or (tokens and tokens[0] in _QUESTION):
        scores[list(table).index("research")] += 1.5
    best = max(scores, key=lambda kind: (scores[kind], -kind))
    return list(table)[best] if scores[best] >= 0.5 else "generic"


def goal_subject(goal: str) -> str:
    """A short phrase for what the goal is about ("authentication bug"), or "" if none."""
    clauses = CLAUSE_END.split(goal[:1000])[:4]
    return next(filter(None, (_subject_of(clause.split()) for clause in clauses)), "")


def clean(word: str) -> str:
    return _EDGE.sub("", word).lower()


def _subject_of(raw: list[str]) -> str:
    raw = raw[:40]
    cleaned = [*map(clean, raw), ""]
    kept = _subject_words(cleaned, _subject_start(cleaned))
    while kept and cleaned[kept[-1]] in _TRAILING:
        kept.pop()
    text = " ".join(raw[index] for index in kept).strip(" ,.;:!?-–—'\"")
    text = clip(text, SUBJECT_CHARS).rstrip(" ,.;:")
    return text if has_word(text) else ""


def _subject_start(cleaned: list[str]) -> int:
    """Where the subject may start: after the leading fillers, determiners and verb.

    `cleaned` ends with an extra "" so that the word after the last can be looked at.
    """
    position, verb_allowed = 0, True  # one leading verb, or one more after "and"
    while position < len(cleaned) - 1:
        word = cleaned[position]
        if word in _VERBS and verb_allowed:
            verb_allowed = False
            position += 2 if cleaned[position + 1] in _PARTICLES else 1
        elif word in _LEADING or word in _DETERMINERS or not word:
            verb_allowed = verb_allowed or word in _JOINERS
            position += 1
        else:
            break
    return position


def _subject_words(cleaned: list[str], start: int) -> list[int]:
    """The indexes of the subject's words: up to a verb after a joiner ("the CLI and deploy
    it"), or a cut word ("for", "to", ...) unless only generic heads came before it
    ("documentation for the CLI" is about the CLI)."""
    kept: list[int] = []
    for index in range(start, len(cleaned) - 1):
        word = cleaned[index]
        if kept and word in _JOINERS and cleaned[index + 1] in _VERBS:
            break
        if kept and word in _CUTS:
            if any(cleaned[head] not in _GENERIC_HEADS for head in kept):
                break
            kept = []
        elif word and (kept or word not in _DETERMINERS) and len(kept) < SUBJECT_WORDS:
            kept.append(index)
    return kept


def has_word(text: str) -> bool:
    return any(char.isalnum() for char in text)


@cache
def _kind_lexicon() -> tuple[Lexicon, frozenset[str], frozenset[str]]:
    lexicon = Lexicon()
    for index, kind in enumerate(kinds().values()):
        for cue in kind.cues:
            lexicon.add(index, cue, 1.0)
    skip = frozenset(stem(word) for word in LEAD_FILLERS | _QUESTION)
    return lexicon, skip, frozenset(stem(verb) for verb in GENERIC_VERBS)


def clip(text: str, limit: int) -> str:
    """`text` on one line, cut at a word to at most `limit` characters, "…" marking a cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit - 1)
    return text[: space if space > 0 else limit - 1] + "…"


MAX_DETAILS = 3  # of each kind: a goal that names more is a list, not one plan's specifics
DETAIL_CHARS = 80

_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.IGNORECASE)
_TICKET = re.compile(
    r"(?<![\w/#-])(?:[A-Z][A-Z0-9]{1,9}-\d{1,7}|#\d{1,7}|GH-\d{1,7})(?![\w-])"
    r"|\b(?:issue|ticket|bug|PR|pull request|incident)\s+#?\d{1,7}\b",
    re.IGNORECASE,
)
_NOT_TICKETS = frozenset({"utf", "iso", "sha", "covid", "md", "x", "rfc", "ipv", "http", "tls"})
_EXTENSIONS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sh|"
    "bash|ps1|yaml|yml|json|toml|ini|cfg|conf|env|md|rst|txt|csv|tsv|sql|html|css|scss|xml|tf|"
    "tfvars|lock|proto|gradle|vue|svelte|dart|lua|r|log|parquet|xlsx|pdf|docx"
)
_FILE = re.compile(rf"^[\w.~/-]*\w\.(?:{_EXTENSIONS})$", re.IGNORECASE)
_BARE_FILES = frozenset({"dockerfile", "makefile", "jenkinsfile", "procfile", "vagrantfile"})
_ENVIRONMENTS = word_set(
    "staging stage production prod preprod pre-production dev development qa uat sandbox canary"
)
_REGION = re.compile(
    r"\b(?:us|eu|ap|sa|ca|me|af|il|mx)-(?:north|south|east|west|central|northeast|northwest|"
    r"southeast|southwest)(?:-\d)?\b",
    re.IGNORECASE,
)
_TOOLS = (
    "python|node|nodejs|node\\.js|java|go|golang|ruby|php|rust|perl|dotnet|\\.net|postgres|"
    "postgresql|mysql|mariadb|redis|mongodb|kubernetes|k8s|django|flask|fastapi|react|vue|angular|"
    "rails|spring|ubuntu|debian|alpine|centos|rhel|terraform|helm|nginx|elasticsearch|kafka|"
    "version|release|api|ios|android|windows|macos|openssl|pydantic|numpy|pandas|typescript"
)
_VERSION = re.compile(
    rf"(?:\b(?i:{_TOOLS})\s+[vV]?\d+(?:\.\d+)*|\b[A-Z][\w+#-]*\s+[vV]?\d+(?:\.\d+)+"
    r"|\b[vV]\d+(?:\.\d+)*|\b\d+\.\d+(?:\.\d+)+|(?:(?<=\bto )|(?<=\bfrom ))\d+\.\d+)"
    r"(?:[-+][\w.]+)?(?![\w.]*\w)"
)
# A capitalised word before a version is its name ("Python 3.12"), unless it is the goal's verb.
_NOT_NAMES = word_set(
    "release deploy upgrade ship migrate install bump update roll publish tag pin build move "
    "switch downgrade test check support drop use top step sprint phase"
)
_PUNCTUATION = "`'\"()[]{}<>,;:!?."


class GoalDetails(NamedTuple):
    """What a goal names, each in the goal's own spelling, in order, without repeats."""

    environments: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    tickets: tuple[str, ...] = ()

    def all(self) -> tuple[str, ...]:
        return (*self.environments, *self.versions, *self.paths, *self.urls, *self.tickets)


def goal_details(text: str) -> GoalDetails:
    """The environments, versions, paths, URLs and tickets `text` names (its first 2000 chars)."""
    text = text[:2000]
    urls = [match.group().rstrip(_PUNCTUATION) for match in _URL.finditer(text)]
    rest = _URL.sub(" ", text)
    paths, without_paths = _split_paths(rest)
    return GoalDetails(
        _unique(_environments(without_paths)),
        _unique(_versions(without_paths)),
        _unique(paths),
        _unique(urls),
        _unique(_tickets(rest)),
    )


def _tickets(text: str) -> list[str]:
    return [
        match.group()
        for match in _TICKET.finditer(text)
        if match.group().split("-")[0].lower() not in _NOT_TICKETS
    ]


def _split_paths(text: str) -> tuple[list[str], str]:
    """The paths and file names in `text`, and the text without them."""
    tokens = [token.strip(_PUNCTUATION) for token in text.split()]
    is_path = [
        (("/" in token or "." in token) and _is_path(token)) or token.lower() in _BARE_FILES
        for token in tokens
    ]
    paths = [token for token, found in zip(tokens, is_path, strict=True) if found]
    rest = " ".join(token for token, found in zip(tokens, is_path, strict=True) if not found)
    return paths, rest


def _environments(text: str) -> list[str]:
    named = [
        token
        for token in (part.strip(_PUNCTUATION) for part in text.split())
        if token.lower() in _ENVIRONMENTS
    ]
    return named + [match.group() for match in _REGION.finditer(text)]


def _versions(text: str) -> list[str]:
    # A region's digits ("us-east-1") are no version.
    return [_version(match.group()) for match in _VERSION.finditer(_REGION.sub(" ", text))]


def _version(found: str) -> str:
    name, _, number = found.partition(" ")
    return number.strip() if number and name.lower() in _NOT_NAMES else found


def _is_path(token: str) -> bool:
    if "://" in token or len(token) < 3:
        return False
    if token.lower() in _BARE_FILES or _FILE.match(token):
        return not re.fullmatch(r"v?\d+(\.\d+)+", token, re.IGNORECASE)
    slashes = token.count("/")
    return slashes > 0 and (
        token.startswith(("/", "./", "~/", "../")) or token.endswith("/") or slashes >= 2
    )


def _unique(found: list[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for item in found:
        if item and len(item) <= DETAIL_CHARS:
            seen.setdefault(item.lower(), item)
    return tuple(seen.values())[:MAX_DETAILS]
