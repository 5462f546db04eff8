"""The tokens of the MLIR text form and the cursor a recursive-descent parser reads them with.

``TokenStream`` splits the whole text into ``Token``s up front (one regular expression, one
alternative per kind) and offers the parser its primitives: look at, accept or expect the next
token, comma-separated lists, string literals. Every error is an ``IRParseError`` at the line and
column of the offending character or token.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from runtime.errors import IRParseError

# One alternative per token kind, tried in order at each position. A whole ``tensor<2x0xf32>`` is one
# token: split into numbers and identifiers it would read ``0xf32`` as a hex literal.
_TOKEN_RE = re.compile(
    r"""
    (?P<skip>[ \t\r\n]+|//[^\n]*)
  | (?P<type>(?:tensor|memref)<[A-Za-z0-9?*]*>?)
  | (?P<value>%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?)
  | (?P<block>\^[A-Za-z0-9_$.\-]+)
  | (?P<symbol>@(?:[A-Za-z_][A-Za-z0-9_$.]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:0x[0-9A-Fa-f]+|[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+))
  | (?P<bare>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>->|[(){}\[\]<>,:=])
    """,
    re.VERBOSE,
)
_HEX_BYTE_RE = re.compile(r"[0-9A-Fa-f]{2}")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_BAD_START = {
    '"': "unterminated string: expected a closing '\"' on the same line",
    "@": "expected a symbol name like @f or @\"any name\" after '@'",
    "-": "expected a digit or '>' after '-'",
    "#": 'aliases (#name) are not supported: write attributes and locations inline, like loc("f.py":3:5)',
}

T = TypeVar("T")


class Token(NamedTuple):
    kind: str  # a group name of _TOKEN_RE, or "eof"
    text: str
    offset: int


def describe(tok: Token) -> str:
    return "end of input" if tok.kind == "eof" else f"'{tok.text}'"


class TokenStream:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.tokens = self._tokenize()
        self.pos = 0

    def error(self, at: Token | int, message: str) -> IRParseError:
        offset = at if isinstance(at, int) else at.offset
        line = bisect.bisect_right(self.line_starts, offset)
        return IRParseError(message, line, offset - self.line_starts[line - 1] + 1, self.filename)

    def _tokenize(self) -> list[Token]:
        tokens, offset = [], 0
        while offset < len(self.text):
            m = _TOKEN_RE.match(self.text, offset)
            if m is None:
                ch = self.text[offset]
                raise self.error(offset, _BAD_START.get(ch, f"unexpected character {ch!r}"))
            assert m.lastgroup is not None
            if m.lastgroup != "skip":
                tokens.append(Token(m.lastgroup, m.group(), offset))
            offset = m.end()
        tokens.append(Token("eof", "", len(self.text)))
        return tokens

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def next(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != "eof":  # the eof token stays current, so errors at the end point at it
            self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok.text == text and tok.kind in ("punct", "bare")

    def accept(self, text: str) -> Token | None:
        return self.next() if self.at(text) else None

    def expect(self, text: str, why: str = "") -> Token:
        if not self.at(text):
            raise self.wrong_token(f"'{text}'{why}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.peek().kind != kind:
            raise self.wrong_token(what)
        return self.next()

    def wrong_token(self, what: str) -> IRParseError:
        """``expected WHAT, found X`` at the current token, or, when that token starts a later line, just
        after the previous one: as in MLIR, a missing piece is reported where it should have been."""
        tok, at = self.peek(), self.peek().offset
        if self.pos > 0:
            prev = self.tokens[self.pos - 1]
            end = prev.offset + len(prev.text)
            at = end if "\n" in self.text[end : tok.offset] else at
        return self.error(at, f"expected {what}, found {describe(tok)}")

    def comma_list(self, close: str, item: Callable[[], T]) -> list[T]:
        """Items separated by ',' up to ``close``, which is consumed (the opening token already was)."""
        items: list[T] = []
        while not self.at(close):
            if items:
                self.expect(",", f" or '{close}'")
            items.append(item())
        self.expect(close)
        return items

    def string(self, tok: Token) -> str:
        """Decode a string token: the escapes MLIR knows, ``\\XX`` as a byte, then UTF-8."""
        body, out, i = tok.text[1:-1], bytearray(), 0
        while i < len(body):
            ch, pos = body[i], tok.offset + 1 + i
            if ch in "\v\f":  # MLIR rejects these raw, so we do too: the text must stay valid MLIR
                raise self.error(pos, f"raw control character {ch!r} in a string: write \\{ord(ch):02X}")
            if ch != "\\":
                out += ch.encode()
                i += 1
            elif body[i + 1] in _ESCAPES:
                out += _ESCAPES[body[i + 1]].encode()
                i += 2
            elif _HEX_BYTE_RE.fullmatch(body, i + 1, i + 3):
                out.append(int(body[i + 1 : i + 3], 16))
                i += 3
            else:
                raise self.error(pos, 'unknown escape in a string: expected \\\\, \\", \\n, \\t or \\XX')
        try:
            return out.decode()
        except UnicodeDecodeError as exc:
            raise self.error(tok, f"string is not valid UTF-8: {exc.reason}") from None
