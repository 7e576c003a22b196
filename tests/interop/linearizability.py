"""A linearizability checker for histories of one register per key (reads, writes and
compare-and-set), after Wing & Gong's search with Lowe's memoisation (the algorithm
porcupine and Knossos use).

A history is a list of `Op`s recorded by concurrent clients: each has a call time and, when
the client learned the outcome, a return time. An operation whose outcome the client never
learned (a timeout, SYNC_WRITE_AMBIGUOUS, a connection cut after the request was sent) is
*indeterminate*: it may have taken effect at any moment after its call, or never. It is
given no return time (it stays open to the end of the history) and the model lets it
either take effect or not.

Linearizability is local (Herlihy & Wing), so `check` splits the history by key and
searches each key's sub-history on its own.

The search (`check_key`): the call and return events, in time order, form a list. Walking
it, the checker linearizes an operation whose call it meets if the model allows it from the
current state, removes that operation's events from the list and starts again from the
head. Meeting a return event means that operation should already have taken effect: the
last choice was wrong, so it backtracks. A (set of linearized operations, state) pair
seen before is never explored twice; that cache is what makes the search practical.

The model, for a key holding `None` (absent) or a value:

| op | outcome | allowed from state s | next state |
|---|---|---|---|
| read | returned v | s == v | s |
| write w | ok or unknown | always | w (unknown: also s) |
| cas v→w | ok | s == v | w |
| cas v→w | failed | s != v | s |
| cas v→w | unknown | always | w if s == v; s |

A compare-and-set compares *values*: clients write unique values, so "the value is still
the one I read" is the same as "the CAS token is still the one I read".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

READ, WRITE, CAS = "read", "write", "cas"
OK, FAIL, UNKNOWN = "ok", "fail", "unknown"


@dataclass
class Op:
    client: int
    key: str
    kind: str                      # READ, WRITE or CAS
    call: int                      # monotonic nanoseconds
    ret: Optional[int]             # None: indeterminate (open to the end of the history)
    value: Optional[str] = None    # READ: what was read (None = absent); WRITE/CAS: new value
    expected: Optional[str] = None  # CAS: the value it compared with (None = absent, an ADD)
    outcome: str = OK              # OK, FAIL (CAS only) or UNKNOWN (ret is None)

    def __post_init__(self) -> None:
        assert self.kind in (READ, WRITE, CAS), self.kind
        assert self.outcome in (OK, FAIL, UNKNOWN), self.outcome
        assert (self.ret is None) == (self.outcome == UNKNOWN), self
        assert self.kind != READ or self.outcome == OK, "a failed read says nothing; drop it"
        assert self.kind == CAS or self.outcome != FAIL, "a failed write had no effect; drop it"
        assert self.ret is None or self.ret >= self.call, self

    def describe(self) -> str:
        t = f"[{self.call / 1e9:.3f}s .. " + \
            ("open" if self.ret is None else f"{self.ret / 1e9:.3f}s") + "]"
        if self.kind == READ:
            what = f"read -> {self.value!r}"
        elif self.kind == WRITE:
            what = f"write {self.value!r}"
        else:
            what = f"cas {self.expected!r} -> {self.value!r}"
        return f"client {self.client} {what} {self.outcome} {t}"


def next_states(op: Op, state: Optional[str]) -> List[Optional[str]]:
    """The states the model may move to when `op` takes effect in `state` (none: not
    allowed). For an indeterminate op, staying put stands for "it never took effect"."""
    if op.kind == READ:
        return [state] if state == op.value else []
    if op.kind == WRITE:
        return [op.value] if op.outcome == OK else [op.value, state]
    if op.outcome == OK:
        return [op.value] if state == op.expected else []
    if op.outcome == FAIL:
        return [state] if state != op.expected else []
    return [op.value, state] if state == op.expected else [state]


@dataclass
class Verdict:
    ok: bool
    key: str
    ops: int
    explored: int
    detail: str = ""


class GaveUp(Exception):
    """The search exceeded its budget: the history is too concurrent to decide."""


@dataclass
class _Entry:
    op_id: int
    is_call: bool
    time: float
    prev: Optional["_Entry"] = None
    next: Optional["_Entry"] = None
    match: Optional["_Entry"] = field(default=None, repr=False)


def _event_list(ops: List[Op]) -> _Entry:
    """The events in time order behind a sentinel head. At equal times a call comes before
    a return, so operations that touch are taken as concurrent (the permissive reading)."""
    events: List[Tuple[float, int, int, bool]] = []
    for i, op in enumerate(ops):
        events.append((op.call, 0, i, True))
        events.append((float("inf") if op.ret is None else op.ret, 1, i, False))
    events.sort()
    head = _Entry(-1, False, float("-inf"))
    calls: Dict[int, _Entry] = {}
    last = head
    for time, _, i, is_call in events:
        e = _Entry(i, is_call, time, prev=last)
        last.next = e
        last = e
        if is_call:
            calls[i] = e
        else:
            e.match = calls[i]
            calls[i].match = e
    return head


def _lift(call: _Entry) -> None:
    """Takes an operation's call and return out of the list."""
    for e in (call, call.match):
        e.prev.next = e.next
        if e.next is not None:
            e.next.prev = e.prev


def _unlift(call: _Entry) -> None:
    """Puts them back (in the reverse order of `_lift`, so the links are restored)."""
    for e in (call.match, call):
        e.prev.next = e
        if e.next is not None:
            e.next.prev = e


def check_key(key: str, ops: List[Op], initial: Optional[str] = None,
              budget: int = 2_000_000) -> Verdict:
    """Whether `ops` (all on `key`) are linearizable from `initial`."""
    ops = sorted(ops, key=lambda o: o.call)
    head = _event_list(ops)
    state = initial
    linearized = 0
    cache = set()
    # (call entry, state before it, index of the next state tried)
    stack: List[Tuple[_Entry, Optional[str], int]] = []
    explored = 0
    best: List[int] = []
    stuck_at: Optional[int] = None
    entry = head.next
    alt = 0
    while head.next is not None:
        explored += 1
        if explored > budget:
            raise GaveUp(f"key {key!r}: more than {budget} steps over {len(ops)} operations")
        if entry.is_call:
            op = ops[entry.op_id]
            choices = next_states(op, state)
            moved = False
            while alt < len(choices):
                nxt = choices[alt]
                lin = linearized | (1 << entry.op_id)
                if (lin, nxt) not in cache:
                    cache.add((lin, nxt))
                    stack.append((entry, state, alt + 1))
                    state, linearized = nxt, lin
                    _lift(entry)
                    entry, alt, moved = head.next, 0, True
                    break
                alt += 1
            if not moved:
                entry, alt = entry.next, 0
        else:
            # This operation returned before anything still open could take effect. The
            # deepest partial linearization is kept for the explanation; copied only here,
            # at a backtrack, so a history that linearizes straight through copies nothing.
            if stuck_at is None or len(stack) >= len(best):
                stuck_at = entry.op_id
                best = [e.op_id for e, _, _ in stack]
            if not stack:
                return Verdict(False, key, len(ops), explored,
                               _explain(ops, best, stuck_at, initial))
            entry, state, alt = stack.pop()
            linearized &= ~(1 << entry.op_id)
            _unlift(entry)
    return Verdict(True, key, len(ops), explored)


def _explain(ops: List[Op], best: List[int], stuck: Optional[int],
             initial: Optional[str]) -> str:
    state = initial
    for i in best:
        choices = next_states(ops[i], state)
        state = choices[0] if choices else state
    lines = [f"no linearization; the longest prefix found takes {len(best)} of {len(ops)} "
             f"operations, the last of them:"]
    lines += ["  " + ops[i].describe() for i in best[-6:]]
    lines.append(f"leaving the value at {state!r}; then nothing open could explain:")
    if stuck is not None:
        s = ops[stuck]
        lines.append("  " + s.describe())
        concurrent = [o for o in ops if o is not s and o.call <= (s.ret or 0)
                      and (o.ret is None or o.ret >= s.call)]
        lines.append(f"operations concurrent with it ({len(concurrent)}):")
        lines += ["  " + o.describe() for o in concurrent[:12]]
    return "\n".join(lines)


def check(history: Iterable[Op], budget: int = 2_000_000) -> List[Verdict]:
    """One verdict per key, keys in sorted order."""
    by_key: Dict[str, List[Op]] = {}
    for op in history:
        by_key.setdefault(op.key, []).append(op)
    return [check_key(k, by_key[k], budget=budget) for k in sorted(by_key)]
