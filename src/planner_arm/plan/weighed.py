"""Work a tool set keeps in memory, and what it weighs: a part built on first use (`Lazy`),
per-tool work that every tool set with the same tool shares (`ToolMemo`), the lane every
build takes (`BuildLane`), and the bytes an object graph holds (`deep_size`), which bounds
the tool sets kept.

Builds run in worker threads: a part is built once however many threads ask for it together
(the others wait for it), and the memo takes a lock around its table.
"""

from __future__ import annotations

import gc
import hashlib
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# Objects that are the program, not its data: never counted, never walked through.
_PROGRAM = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
)


# Objects that hold no other: counted without asking the collector what they refer to.
_LEAVES = frozenset({str, bytes, int, float, bool, complex, type(None)})


def deep_size(root: object, shared: Iterable[object] = ()) -> int:
    """The bytes `root` holds: its own and those of every object it reaches, each counted
    once (`sys.getsizeof`, a numpy array's buffer included), except `shared` objects (and
    what only they reach), classes, modules and functions."""
    seen = {id(item) for item in shared}
    if id(root) in seen:
        return 0
    seen.add(id(root))
    pending = [root]
    total = 0
    size_of, referents, leaves = sys.getsizeof, gc.get_referents, _LEAVES
    while pending:
        item = pending.pop()
        total += size_of(item)
        inner_objects = referents(item)
        if isinstance(item, dict):  # the collector is not told of a dict's string keys
            inner_objects += item.keys()
        for inner in inner_objects:
            key = id(inner)
            if key in seen:
                continue
            seen.add(key)
            if type(inner) in leaves:
                total += size_of(inner)
            elif not isinstance(inner, _PROGRAM):
                pending.append(inner)
    return total


class BuildLane:
    """The threads that may do tool-set work at once (build a set or a part of one, rank its
    tools): Python code under the interpreter lock, which more threads would only share among
    themselves and with the event loop. The thread in the lane may enter it again."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._slots = threading.BoundedSemaphore(width)
        self._depth = threading.local()

    @contextmanager
    def held(self) -> Iterator[None]:
        depth: int = getattr(self._depth, "value", 0)
        if not depth:
            self._slots.acquire()
        self._depth.value = depth + 1
        try:
            yield
        finally:
            self._depth.value = depth
            if not depth:
                self._slots.release()

    def run(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in the lane, in the calling thread (a worker thread)."""
        with self.held():
            return work(*args)


class Lazy(Generic[T]):
    """A part built the first time it is asked for (in `lane`), then kept, with its weight
    in bytes."""

    __slots__ = ("_build", "_lane", "_lock", "_value", "weight")

    def __init__(self, build: Callable[[], T], lane: BuildLane | None = None) -> None:
        self._build: Callable[[], T] | None = build
        self._lane = lane
        self._lock = threading.Lock()
        self._value: T | None = None
        self.weight = 0

    @property
    def built(self) -> bool:
        return self._build is None

    def get(self) -> T:
        if self._build is not None:
            # The lane before the lock: a thread waiting for the lock never holds it back.
            with self._lane.held() if self._lane is not None else nullcontext(), self._lock:
                build = self._build
                if build is not None:
                    self._value = build()
                    self.weight = deep_size(self._value)
                    self._build = None  # built; and what the build closed over is let go
        return self._value  # type: ignore[return-value]  # set once built


def content_key(*texts: str) -> bytes:
    """A short digest of some texts, as a memo's key: the texts themselves are not kept."""
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.digest()


class ToolMemo:
    """Per-tool work shared by the tool sets that have the tool (its words as the index reads
    them), kept by content: least recently used out past `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def found(self, key: Hashable) -> Any:
        """The entry under `key`, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def keep(self, key: Hashable, value: object) -> None:
        """Keeps `value` under `key`, weighed; the least recently used go past the bound."""
        weight = deep_size(value)  # outside the lock: other threads' lookups go on meanwhile
        with self._lock:
            if key in self._entries or weight > self.max_bytes:
                return
            self._entries[key] = (value, weight)
            self.bytes += weight
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


@dataclass(frozen=True)
class SharedWork:
    """What the tool sets of requests share: the memo of per-tool work, and the lane their
    builds take."""

    memo: ToolMemo
    lane: BuildLane
