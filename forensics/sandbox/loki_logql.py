"""The sandbox Loki's LogQL: the subset the tool sends (a stream selector, line filters and label
filters), lexed, parsed and matched as Loki does, RE2 translated to `re`. A label filter
(`| pod=~"x"`) sees the stream's labels and the entry's structured metadata alike, anchored as
a Prometheus matcher. Pure: no state, no I/O (the in-process fakes share it). Upstream:
docs/upstream.md, "The sandbox servers".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import contains, not_
from typing import Any

from forensics.sandbox.loki_params import BadRequest

ERR_EMPTY_MATCHERS = (
    "queries require at least one regexp or equality matcher that does not have an "
    'empty-compatible value. For instance, app=~".*" does not meet this requirement, '
    'but app=~".+" will'
)
_SUBSET = (
    "the sandbox Loki understands log queries made of a stream selector, the line filters "
    '|=, !=, |~ and !~, and label filters (| name="value", =~, !=, !~) only'
)
_TOKENS = ("=~", "!~", "!=", "|=", "|~", "{", "}", ",", "=", "|", "(", ")")
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
}


@dataclass(frozen=True)
class _Tok:
    kind: str  # a token text from _TOKENS, "IDENTIFIER", "STRING", or "$end"
    text: str
    line: int
    col: int


def _parse_error(tok: _Tok | None, msg: str) -> BadRequest:
    if tok is None:
        return BadRequest(f"parse error : {msg}")
    return BadRequest(f"parse error at line {tok.line}, col {tok.col}: {msg}")


def _unquote(raw: str, tok: _Tok) -> str:
    """Go's strconv.Unquote as Prometheus' strutil uses it: escapes in "...", none in `...`."""
    if raw[0] == "`":
        return raw[1:-1].replace("\r", "")
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogatepass")
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt].encode()
            i += 2
        elif nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise _parse_error(tok, "invalid syntax")
            v = int(digits, 16)
            if nxt == "x":
                out.append(v)
            elif v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                raise _parse_error(tok, "invalid syntax")
            else:
                out += chr(v).encode()
            i += 2 + width
        elif nxt and nxt in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not all(d in "01234567" for d in digits) or int(digits, 8) > 255:
                raise _parse_error(tok, "invalid syntax")
            out.append(int(digits, 8))
            i += 4
        else:
            raise _parse_error(tok, "invalid syntax")
    return out.decode("utf-8", errors="surrogateescape")


def _lex(q: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, line, line_start = 0, 1, 0
    while True:
        while i < len(q) and q[i] in " \t\r\n":
            if q[i] == "\n":
                line, line_start = line + 1, i + 1
            i += 1
        col = i - line_start + 1
        if i >= len(q):
            toks.append(_Tok("$end", "", line, col))
            return toks
        c = q[i]
        if c == "#":  # a comment runs to the end of the line
            while i < len(q) and q[i] != "\n":
                i += 1
            continue
        if c in '"`':
            tok, i = _lex_string(q, i, line, col)
        else:
            tok = _lex_symbol(q, i, line, col)
            i += len(tok.text)
        toks.append(tok)


def _lex_string(q: str, i: int, line: int, col: int) -> tuple[_Tok, int]:
    """The string literal starting at `q[i]` (a quote or backtick), unquoted; and where it ends."""
    c = q[i]
    j = i + 1
    while j < len(q) and q[j] != c:
        if c == '"' and q[j] == "\n":
            break
        j += 2 if c == '"' and q[j] == "\\" else 1
    if j >= len(q) or q[j] != c:
        raise _parse_error(_Tok("STRING", q[i:], line, col), "literal not terminated")
    tok = _Tok("STRING", q[i : j + 1], line, col)
    return _Tok("STRING", _unquote(tok.text, tok), line, col), j + 1


def _lex_symbol(q: str, i: int, line: int, col: int) -> _Tok:
    """An operator or punctuation token at `q[i]`, else an identifier (one character at least)."""
    for t in _TOKENS:
        if q.startswith(t, i):
            return _Tok(t, t, line, col)
    m = _IDENT.match(q, i)
    end = m.end() if m else i + 1
    return _Tok("IDENTIFIER", q[i:end], line, col)


def _re2_to_python(pattern: str) -> str:
    """RE2 syntax → Python `re`, refusing what RE2 refuses (lookaround, backreferences)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt.isdigit() and nxt != "0":
                raise ValueError(f"invalid escape sequence: `\\{nxt}`")
            if nxt in "pP":
                raise ValueError(f"the sandbox cannot evaluate Unicode classes (`\\{nxt}`)")
            out.append("\\Z" if nxt == "z" else pattern[i : i + 2])
            i += 2
            continue
        if pattern.startswith("(?", i):
            for perl in ("(?=", "(?!", "(?<=", "(?<!", "(?P="):
                if pattern.startswith(perl, i):
                    raise ValueError(f"invalid or unsupported Perl syntax: `{perl}`")
            if pattern.startswith("(?<", i):
                out.append("(?P<")
                i += 3
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _compile(pattern: str, tok: _Tok, anchored: bool) -> re.Pattern[str]:
    try:
        # Prometheus anchors label regexes as ^(?s:...)$; line filter regexes are unanchored.
        py = _re2_to_python(pattern)
        return re.compile(f"(?s:{py})" if anchored else py)
    except (ValueError, re.error) as e:
        msg = e.msg if isinstance(e, re.error) else str(e)
        raise _parse_error(tok, f"error parsing regexp: {msg}: `{pattern}`") from None


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a stream selector."""

    name: str
    op: str
    value: str
    regex: re.Pattern[str] | None = None

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = self.regex is not None and self.regex.fullmatch(value) is not None
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True)
class LineFilter:
    """One line filter stage; `selectors` maps lines to truthy/falsy keep flags in C."""

    op: str
    value: str
    regex: re.Pattern[str] | None = None

    def selectors(self, lines: Iterator[str]) -> Iterator[Any]:
        if self.op in ("|=", "!="):
            hits: Iterator[Any] = map(contains, lines, repeat(self.value))
        else:
            assert self.regex is not None
            hits = map(self.regex.search, lines)
        return hits if self.op in ("|=", "|~") else map(not_, hits)

    def keep(self, line: str) -> bool:
        if self.op in ("|=", "!="):
            hit = self.value in line
        else:
            assert self.regex is not None
            hit = self.regex.search(line) is not None
        return hit if self.op in ("|=", "|~") else not hit


@dataclass(frozen=True)
class LogQuery:
    """A parsed log query of the subset: matchers and line filters."""

    matchers: tuple[Matcher, ...]
    filters: tuple[LineFilter, ...]
    label_filters: tuple[Matcher, ...] = ()

    def selects(self, labels: dict[str, str]) -> bool:
        return all(m.matches(labels.get(m.name, "")) for m in self.matchers)

    def passes(self, labels: dict[str, str]) -> bool:
        """The label filters, over stream labels and structured metadata together."""
        return all(m.matches(labels.get(m.name, "")) for m in self.label_filters)


def _unexpected(tok: _Tok, expecting: str) -> BadRequest:
    got = tok.kind if tok.kind in ("$end", "IDENTIFIER", "STRING") else tok.text
    return _parse_error(tok, f"syntax error: unexpected {got}, expecting {expecting}")


def _at(toks: list[_Tok], i: int) -> _Tok:
    return toks[min(i, len(toks) - 1)]  # the last token is always $end


def _parse_selector(toks: list[_Tok], pos: int) -> tuple[list[Matcher], int]:
    tok = toks[pos]
    if tok.kind != "{":
        if tok.kind == "IDENTIFIER" and _at(toks, pos + 1).kind == "(":
            raise _parse_error(None, f"{_SUBSET}; metric queries such as {tok.text}(...) are not")
        raise _unexpected(tok, "{")
    pos += 1
    matchers: list[Matcher] = []
    while True:
        name, op, val = _at(toks, pos), _at(toks, pos + 1), _at(toks, pos + 2)
        if name.kind == "}" and not matchers:
            raise _parse_error(None, ERR_EMPTY_MATCHERS)
        if name.kind != "IDENTIFIER" or not _IDENT.fullmatch(name.text):
            raise _unexpected(name, "IDENTIFIER")
        if op.kind not in ("=", "!=", "=~", "!~"):
            raise _unexpected(op, "= or != or =~ or !~")
        if val.kind != "STRING":
            raise _unexpected(val, "STRING")
        regex = _compile(val.text, val, anchored=True) if op.kind in ("=~", "!~") else None
        matchers.append(Matcher(name.text, op.kind, val.text, regex))
        sep = _at(toks, pos + 3)
        pos += 4
        if sep.kind == "}":
            return matchers, pos
        if sep.kind != ",":
            raise _unexpected(sep, ", or }")


def parse_log_query(query: str) -> LogQuery:
    """Parse the LogQL subset; BadRequest with a Loki-style `parse error ...` text otherwise."""
    toks = _lex(query)
    matchers, pos = _parse_selector(toks, 0)
    if not any(not m.matches("") for m in matchers):
        raise _parse_error(None, ERR_EMPTY_MATCHERS)
    filters: list[LineFilter] = []
    label_filters: list[Matcher] = []
    while toks[pos].kind != "$end":
        op, val = toks[pos], _at(toks, pos + 1)
        if op.kind == "|":
            label_filters.append(_label_filter(toks, pos + 1))
            pos += 4
            continue
        if op.kind not in ("|=", "!=", "|~", "!~"):
            raise _unexpected(op, "|= or != or |~ or !~ or |")
        if val.kind != "STRING":
            raise _unexpected(val, "STRING")
        regex = _compile(val.text, val, anchored=False) if op.kind in ("|~", "!~") else None
        filters.append(LineFilter(op.kind, val.text, regex))
        pos += 2
    return LogQuery(tuple(matchers), tuple(filters), tuple(label_filters))


def _label_filter(toks: list[_Tok], pos: int) -> Matcher:
    """`name op "value"` after a `|`: a string label filter; any other stage is refused."""
    name, op, val = _at(toks, pos), _at(toks, pos + 1), _at(toks, pos + 2)
    if name.kind != "IDENTIFIER" or op.kind not in ("=", "!=", "=~", "!~"):
        stage = name.text if name.kind == "IDENTIFIER" else name.kind
        raise _parse_error(None, f"{_SUBSET}; the stage | {stage} is not")
    if val.kind != "STRING":
        raise _unexpected(val, "STRING")
    regex = _compile(val.text, val, anchored=True) if op.kind in ("=~", "!~") else None
    return Matcher(name.text, op.kind, val.text, regex)


def parse_selector_only(query: str) -> list[Matcher]:
    """A bare stream selector (the series API's `match[]`)."""
    toks = _lex(query)
    matchers, pos = _parse_selector(toks, 0)
    if toks[pos].kind != "$end":
        raise BadRequest("only label matchers are supported")
    return matchers
