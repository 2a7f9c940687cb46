"""The subset of GitLab CI ``rules:if`` expressions the stand-in evaluates.

Grammar (GitLab's ``Gitlab::Ci::Pipeline::Expression`` lexemes, trimmed)::

    expr       := or_expr
    or_expr    := and_expr ( "||" and_expr )*
    and_expr   := primary  ( "&&" primary )*
    primary    := "(" expr ")" | operand [ ("==" | "!=" | "=~" | "!~") operand ]
    operand    := $VAR | ${VAR} | "string" | 'string' | /regex/flags | null

Semantics follow GitLab: an undefined variable is ``null``; a bare ``$VAR`` is
true when the variable is defined and non-empty; ``=~`` searches with the regex
(the ``i`` flag is honoured); ``&&`` binds tighter than ``||``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

__all__ = ["ExpressionError", "evaluate"]


class ExpressionError(ValueError):
    """A ``rules:if`` expression the stand-in cannot parse."""


_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<lparen>\() | (?P<rparen>\)) |
        (?P<and>&&) | (?P<or>\|\|) |
        (?P<op>==|!=|=~|!~) |
        (?P<var>\$\{?[A-Za-z_][A-Za-z0-9_]*\}?) |
        (?P<dq>"(?:[^"\\]|\\.)*") | (?P<sq>'(?:[^'\\]|\\.)*') |
        (?P<regex>/(?:[^/\\]|\\.)*/[a-z]*) |
        (?P<null>null\b)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str


def _tokenize(source: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    source = source.rstrip()
    while pos < len(source):
        m = _TOKEN_RE.match(source, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"cannot parse rules:if expression {source!r} at offset {pos}")
        kind = m.lastgroup or ""
        tokens.append(_Tok(kind, m.group(kind)))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, source: str, variables: Mapping[str, str]) -> None:
        self.source = source
        self.tokens = _tokenize(source)
        self.i = 0
        self.variables = variables

    def _peek(self) -> _Tok | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self) -> _Tok:
        tok = self._peek()
        if tok is None:
            raise ExpressionError(f"unexpected end of rules:if expression {self.source!r}")
        self.i += 1
        return tok

    def parse(self) -> bool:
        value = self._or()
        if self._peek() is not None:
            raise ExpressionError(f"unexpected {self._peek().text!r} in rules:if expression {self.source!r}")  # type: ignore[union-attr]
        return value

    def _or(self) -> bool:
        value = self._and()
        while (tok := self._peek()) is not None and tok.kind == "or":
            self._take()
            rhs = self._and()
            value = value or rhs
        return value

    def _and(self) -> bool:
        value = self._primary()
        while (tok := self._peek()) is not None and tok.kind == "and":
            self._take()
            rhs = self._primary()
            value = value and rhs
        return value

    def _primary(self) -> bool:
        tok = self._peek()
        if tok is not None and tok.kind == "lparen":
            self._take()
            value = self._or()
            if self._take().kind != "rparen":
                raise ExpressionError(f"missing ')' in rules:if expression {self.source!r}")
            return value
        left_tok = self._take()
        left = self._operand(left_tok)
        nxt = self._peek()
        if nxt is None or nxt.kind != "op":
            if left_tok.kind == "regex":
                raise ExpressionError(f"a regex alone is not a condition: {self.source!r}")
            return bool(left)
        op = self._take().text
        right_tok = self._take()
        right = self._operand(right_tok)
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        pattern = right if isinstance(right, re.Pattern) else _compile_regex(str(right or ""))
        found = left is not None and pattern.search(str(left)) is not None
        return found if op == "=~" else not found

    def _operand(self, tok: _Tok) -> str | None | re.Pattern[str]:
        if tok.kind == "var":
            name = tok.text.lstrip("$").strip("{}")
            return self.variables.get(name)
        if tok.kind in ("dq", "sq"):
            return tok.text[1:-1].replace("\\" + tok.text[0], tok.text[0])
        if tok.kind == "null":
            return None
        if tok.kind == "regex":
            return _compile_regex(tok.text)
        raise ExpressionError(f"unexpected {tok.text!r} in rules:if expression {self.source!r}")


def _compile_regex(text: str) -> re.Pattern[str]:
    m = re.fullmatch(r"/(.*)/([a-z]*)", text, re.S)
    if not m:
        raise ExpressionError(f"not a /regex/: {text!r}")
    flags = re.I if "i" in m.group(2) else 0
    try:
        return re.compile(m.group(1), flags)
    except re.error as exc:
        raise ExpressionError(f"invalid regex {text!r}: {exc}") from None


def evaluate(expression: str, variables: Mapping[str, str]) -> bool:
    """Evaluate a ``rules:if`` expression against the job's variables.

    >>> evaluate('$CI_PIPELINE_SOURCE == "parent_pipeline" && $RETRY_BOT', {"CI_PIPELINE_SOURCE": "parent_pipeline", "RETRY_BOT": "1"})
    True
    """
    return _Parser(expression, variables).parse()
