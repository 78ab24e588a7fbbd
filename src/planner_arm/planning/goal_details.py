"""The specifics a goal names, found by pattern: environments, versions, files and paths, URLs
and ticket ids. The rule-based planner puts each where it belongs (the environment in the
deploy step, the file in the search and fix steps); pure, no I/O.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from planner_arm.plan.lexicon import word_set

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
_EDGE = "`'\"()[]{}<>,;:!?."


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
    urls = [match.group().rstrip(_EDGE) for match in _URL.finditer(text)]
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
    tokens = [token.strip(_EDGE) for token in text.split()]
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
        for token in (part.strip(_EDGE) for part in text.split())
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
