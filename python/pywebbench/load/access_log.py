"""A traffic mix from an access log (docs/mix.md, "From an access log").

Reads nginx's ``combined`` format and gunicorn's default access-log format (the same layout,
``'%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'``; which of the two wrote a
file is told by its marks: gunicorn writes ``-`` for an empty body where nginx writes ``0``,
and a gunicorn log file often holds its error-log lines too). The ``common`` format (no
referrer and user agent) reads as well.

Paths are grouped into endpoints: a path segment that is all digits becomes ``{id}``, a UUID
``{uuid}``, a hex hash of 16 characters or more ``{hash}``; user rules (a regular expression
matched against the whole path, and the endpoint's name) come first. Each endpoint keeps its
share of the replayable requests as its weight, and its most common concrete requests (path
with query) as entries, weighted by their counts. Requests that cannot be replayed safely
are dropped, each with its reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pywebbench.catalogue.mix import MixEntry

#: nginx combined / gunicorn default: ``host ident user [time] "request" status bytes``, then
#: optionally ``"referrer" "user agent"`` (and anything after them, e.g. nginx's extra fields).
LINE = re.compile(
    r"^(?P<host>\S+) (?P<ident>\S+) (?P<user>\S+) \[(?P<time>[^\]]+)\] "
    r'"(?P<request>(?:[^"\\]|\\.)*)" (?P<status>\d{3}) (?P<bytes>\d+|-)'
    r'(?: "(?:[^"\\]|\\.)*" "(?:[^"\\]|\\.)*")?(?: .*)?$'
)
#: A gunicorn error-log line (gunicorn's ``--error-logfile`` and ``--access-logfile`` are
#: often the same file): ``[2026-12-05 00:00:00 +0000] [42] [INFO] Booting worker``.
GUNICORN_ERROR_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [^\]]*\] \[\d+\] \[[A-Z]+\] ")
#: The methods kept by default: safe ones (RFC 9110, 9.2.1), which a replay cannot harm.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
#: Methods that change state (kept with ``include_unsafe`` only: their bodies are not in
#: access logs, so a mix has to name one per endpoint).
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HASH = re.compile(r"^[0-9a-fA-F]{16,}$")


class AccessLogError(ValueError):
    """An access log that yields no mix; the message is one line."""


@dataclass(frozen=True)
class Rule:
    """A user grouping rule: a path that ``pattern`` matches whole is the endpoint ``name``."""

    pattern: re.Pattern[str]
    name: str

    @classmethod
    def parse(cls, text: str) -> Rule:
        """``REGEX=NAME`` (split at the last ``=``).

        Raises:
            ValueError: one line saying what is wrong.
        """
        regex, sep, name = text.rpartition("=")
        if not sep or not regex or not name.strip():
            raise ValueError(f"{text!r}: expected REGEX=NAME, e.g. '/users/[^/]+=/users/{{name}}'")
        try:
            return cls(re.compile(regex), name.strip())
        except re.error as e:
            raise ValueError(f"{text!r}: bad regular expression: {e}") from None


def template(path: str, rules: Sequence[Rule] = ()) -> str:
    """The endpoint path of a concrete ``path`` (no query): the first rule whose pattern
    matches it whole names it; otherwise each segment that is all digits becomes ``{id}``,
    a UUID ``{uuid}``, a hex hash of 16 characters or more ``{hash}``."""
    for rule in rules:
        if rule.pattern.fullmatch(path):
            return rule.name
    out = []
    for seg in path.split("/"):
        if seg.isdigit():
            out.append("{id}")
        elif _UUID.match(seg):
            out.append("{uuid}")
        elif _HASH.match(seg):
            out.append("{hash}")
        else:
            out.append(seg)
    return "/".join(out)


@dataclass
class LogRequest:
    """One readable log line: its request and status."""

    method: str
    target: str
    status: int
    #: The body size was written ``-`` (gunicorn does for an empty body; nginx writes 0).
    no_bytes: bool = False


@dataclass
class Endpoint:
    """One endpoint's requests in the log."""

    name: str
    count: int = 0
    #: (target, status) -> count
    targets: Counter[tuple[str, int]] = field(default_factory=Counter)


@dataclass
class LogMix:
    """What an access log gave: the format, the lines read and skipped, the requests
    dropped and why, and the endpoints."""

    format: str
    lines: int
    readable: int
    skipped: int
    first_skipped: int | None
    #: reason -> count
    dropped: Counter[str]
    replayable: int
    endpoints: list[Endpoint]
    entries: list[MixEntry]


def parse_line(line: str) -> LogRequest | None:
    """The request and status of one log line; None when it is not an access-log line."""
    m = LINE.match(line.rstrip("\r\n"))
    if m is None:
        return None
    parts = m.group("request").split(" ")
    method, target = (parts[0], parts[1]) if len(parts) == 3 else ("", m.group("request"))
    return LogRequest(method, target, int(m.group("status")), m.group("bytes") == "-")


def _drop_reason(req: LogRequest, include_unsafe: bool) -> str | None:
    """Why a request cannot go into the mix (None: it can)."""
    if not req.method:
        return "malformed request line (not METHOD TARGET HTTP/x)"
    if req.method in UNSAFE_METHODS and not include_unsafe:
        return (
            f"{req.method}: not safe to replay (it changes state, and its body is not in the "
            "log); --include-unsafe keeps it"
        )
    if req.method not in SAFE_METHODS + UNSAFE_METHODS:
        return f"{req.method}: not a method a mix sends"
    if not req.target.startswith("/") or any(c in req.target for c in " \r\n"):
        return "target not a path (absolute URL, '*', or garbage)"
    if req.status == 499:
        return "status 499: the client went away before the answer (nginx)"
    return None


def read_log(
    lines: Iterable[str],
    *,
    rules: Sequence[Rule] = (),
    include_unsafe: bool = False,
    variants: int = 3,
    where: str = "access log",
) -> LogMix:
    """Read an access log into a mix.

    Each endpoint ("METHOD /path/{id}") gets its share of the replayable requests (in
    percent) as its weight, spread over its ``variants`` most common concrete requests (path
    with query) in proportion to their counts. An entry expects the statuses its request got
    in the log below 500 (a 404 share stays a 404 share, not an error), or 200 when it only
    ever got 5xx.

    Raises:
        AccessLogError: no readable line, or nothing replayable (one line).
    """
    total = readable = skipped = 0
    first_skipped: int | None = None
    gunicorn_marks = 0
    dropped: Counter[str] = Counter()
    endpoints: dict[str, Endpoint] = {}
    for number, line in enumerate(lines, 1):
        total += 1
        if not line.strip():
            continue
        req = parse_line(line)
        if req is None:
            if GUNICORN_ERROR_LINE.match(line):
                gunicorn_marks += 1
            skipped += 1
            if first_skipped is None:
                first_skipped = number
            continue
        readable += 1
        gunicorn_marks += req.no_bytes
        reason = _drop_reason(req, include_unsafe)
        if reason is not None:
            dropped[reason] += 1
            continue
        path = req.target.split("?", 1)[0]
        name = f"{req.method} {template(path, rules)}"
        ep = endpoints.setdefault(name, Endpoint(name))
        ep.count += 1
        ep.targets[(req.target, req.status)] += 1
    if readable == 0:
        at = f", the first unreadable is line {first_skipped}" if first_skipped else ""
        raise AccessLogError(
            f"{where}: no readable line among {total} lines{at} (expected nginx 'combined' "
            "or gunicorn's default access-log format)"
        )
    replayable = sum(ep.count for ep in endpoints.values())
    if replayable == 0:
        why = "; ".join(f"{n} {r}" for r, n in dropped.most_common())
        raise AccessLogError(f"{where}: no replayable request among {readable}: {why}")
    ordered = sorted(endpoints.values(), key=lambda e: (-e.count, e.name))
    entries = [e for ep in ordered for e in _entries(ep, replayable, variants)]
    return LogMix(
        format="gunicorn" if gunicorn_marks else "nginx combined",
        lines=total,
        readable=readable,
        skipped=skipped,
        first_skipped=first_skipped,
        dropped=dropped,
        replayable=replayable,
        endpoints=ordered,
        entries=entries,
    )


def _entries(ep: Endpoint, replayable: int, variants: int) -> list[MixEntry]:
    """An endpoint's entries: its most common concrete requests, weighted so that they sum
    to the endpoint's share of the replayable requests (percent)."""
    by_target: Counter[str] = Counter()
    statuses: dict[str, set[int]] = {}
    for (target, status), n in ep.targets.items():
        by_target[target] += n
        statuses.setdefault(target, set()).add(status)
    kept = sorted(by_target.items(), key=lambda kv: (-kv[1], kv[0]))[: max(1, variants)]
    kept_total = sum(n for _, n in kept)
    share = 100.0 * ep.count / replayable
    method = ep.name.split(" ", 1)[0]
    out = []
    for target, n in kept:
        expect = sorted(s for s in statuses[target] if s < 500) or [200]
        out.append(
            MixEntry(
                name=ep.name,
                weight=round(share * n / kept_total, 6),
                method=method,
                path=target,
                expect_status=expect,
            )
        )
    return out


def read_log_file(
    path: Path,
    *,
    rules: Sequence[Rule] = (),
    include_unsafe: bool = False,
    variants: int = 3,
) -> LogMix:
    """:func:`read_log` of a file (undecodable bytes replaced).

    Raises:
        AccessLogError: the file cannot be read, or yields no mix (one line).
    """
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return read_log(
                f, rules=rules, include_unsafe=include_unsafe, variants=variants, where=str(path)
            )
    except OSError as e:
        raise AccessLogError(f"{path}: cannot read: {e.strerror or e}") from None
