"""How any text is read as words: words of any script, a light stemmer, word sets, the
stopwords, and the specifics a text names (names, numbers, quotes, addresses). Every folder
that matches words against words reads them here: the arm resolver and the quality checks
(plan/), the rule-based planners (rules/, tools/).
"""

from __future__ import annotations

import re
from functools import lru_cache


def word_set(text: str) -> frozenset[str]:
    """The words of `text`, as a set: word lists are written as one string."""
    return frozenset(text.split())


_IRREGULAR = {
    "ran": "run",
    "built": "build",
    "wrote": "write",
    "written": "write",
    "found": "find",
    "chose": "choose",
    "chosen": "choose",
    "sent": "send",
    "made": "make",
    "began": "begin",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")
_E_MAIL = re.compile(r"\be-mail", re.IGNORECASE)


def words(text: str) -> list[str]:
    """Lower-case words of any script; `snake_case`, `camelCase` and hyphens split apart
    ("e-mail" is one word, "email")."""
    return _WORD.findall(_CAMEL.sub(" ", _E_MAIL.sub("email", text)).lower())


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A light suffix stripper: "deployed", "deploys", "deploying" and "deploy" agree.

    It only has to map the forms of one word together, not to produce a real word.
    """
    word = _IRREGULAR.get(word, word)
    for suffix, replacement in (
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) + len(replacement) >= 3:
            if suffix == "s" and word[-2] in "siu":
                break  # "class", "analysis", "status"
            word = word[: len(word) - len(suffix)] + replacement
            break
    return _respelled(word)


def _respelled(word: str) -> str:
    """A word without its suffix, with the spellings of one stem made one."""
    if word.endswith(("tion", "sion")) and len(word) >= 7:
        word = word[:-3]  # "validation" -> "validat", as "validate" becomes below
    if word.endswith("e") and len(word) >= 4:
        word = word[:-1]
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # "running" -> "runn" -> "run"
    elif len(word) >= 5 and word.endswith("ll"):
        word = word[:-1]  # "cancelling" -> "cancell" and "cancel" agree, as "installs", "install"
    if len(word) >= 4 and word[-1] == "y" and word[-2] not in "aeiou":
        word = word[:-1] + "i"  # "movie", "movies" -> "movy"; "query", "queries": one stem
    if len(word) >= 6 and word.endswith(("is", "ys")):
        word = word[:-1] + "z"  # British and American spellings: "summarise", "summarize"
    return word


ARTICLES = word_set("a an the")
STOPWORDS = word_set(
    "a an the and or of to for in on at by as is are be it its this that with from into "
    "between then than every all each any other up down out over"
)


# Names, numbers, quotes, e-mail addresses and channels: what a piece of a request is about.
# A name runs over "of" and "the" between capitalised words ("The Lord of the Rings").
_SPECIFIC = re.compile(
    r"\"[^\"]+\"|'[^']+'|(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.]+|#[\w-]+|(?<![\w.])\d[\w.:/-]*"
    r"|(?<=\s)[A-Z][\w-]*(?:\s+(?:(?:of|the|de|du|la|le|von|van)\s+)*[A-Z][\w-]*)*"
)


def specifics(text: str) -> list[str]:
    """The names, numbers, quotes, e-mail addresses and channels a text names, in order."""
    found = [match.group().strip("\"'") for match in _SPECIFIC.finditer(text)]
    return list(dict.fromkeys(value for value in found if value != "I"))
