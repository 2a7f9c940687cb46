"""GitLab Runner's variable expansion, for the stand-in's runner side and tests.

The runner expands every job variable that is not ``raw`` before the job sees it
(R ``common/variables.go``: ``JobVariables.Expand`` -> ``ExpandValue`` ->
``os.Expand(value, b.Get)``), and ``Get`` answers:

* ``$`` for the name ``$`` (so ``$$`` becomes ``$``);
* the empty string for the shell's special parameters ``* # @ ! ? 0-9`` (so ``$?``
  and ``$1`` vanish);
* otherwise the **last** variable of that name, or the empty string.

:func:`go_os_expand` is Go's ``os.Expand`` (``src/os/env.go``: ``Expand``,
``getShellName``, ``isShellSpecialVar``, ``isAlphaNum``) transcribed: ``${}`` and
an unterminated ``${`` are eaten, a ``$`` followed by no name (``$(``, ``$ ``, a
trailing ``$``) is left as it is.  The newest runners call ``shell.LegacyExpand``
instead, which keeps ``os.Expand``'s behaviour for these cases (docs/standin.md).

This module is the small faithful copy the retry bot's tests use to prove the
resize configuration survives expansion byte for byte; the demo's runner
emulation (``runner_wrapper/local_runner.py``) has its own.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

__all__ = ["go_os_expand", "runner_get", "runner_expand"]

_SPECIAL = set("*#$@!?-0123456789")


def _is_alnum(c: str) -> bool:
    return c == "_" or ("0" <= c <= "9") or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _shell_name(s: str) -> tuple[str, int]:
    """Go's ``getShellName``: the name after a ``$`` and how many bytes it used."""
    if s[0] == "{":
        if len(s) > 2 and s[1] in _SPECIAL and s[2] == "}":
            return s[1:2], 3
        for i in range(1, len(s)):
            if s[i] == "}":
                if i == 1:
                    return "", 2  # bad syntax; eat "${}"
                return s[1:i], i + 1
        return "", 1  # bad syntax; eat "${"
    if s[0] in _SPECIAL:
        return s[0:1], 1
    i = 0
    while i < len(s) and _is_alnum(s[i]):
        i += 1
    return s[:i], i


def go_os_expand(s: str, mapping: Callable[[str], str]) -> str:
    """Go's ``os.Expand(s, mapping)``."""
    buf: list[str] | None = None
    i = 0
    j = 0
    while j < len(s):
        if s[j] == "$" and j + 1 < len(s):
            if buf is None:
                buf = []
            buf.append(s[i:j])
            name, w = _shell_name(s[j + 1:])
            if name == "" and w > 0:
                pass  # invalid syntax: eat the characters
            elif name == "":
                buf.append(s[j])  # "$" not followed by a name: keep it
            else:
                buf.append(mapping(name))
            j += w
            i = j + 1
        j += 1
    if buf is None:
        return s
    return "".join(buf) + s[i:]


def runner_get(variables: Sequence[Mapping[str, Any]]) -> Callable[[str], str]:
    """R ``JobVariables.Get``: the last definition wins; ``$`` and special parameters as above."""
    def get(key: str) -> str:
        if key == "$":
            return key
        if key in ("*", "#", "@", "!", "?") or key.isdigit() and len(key) == 1:
            return ""
        for v in reversed(variables):
            if v.get("key") == key:
                return str(v.get("value", ""))
        return ""
    return get


def runner_expand(variables: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The job's environment after R ``JobVariables.Expand`` (non-raw values expanded; last key wins)."""
    get = runner_get(variables)
    out: dict[str, str] = {}
    for v in variables:
        value = str(v.get("value", ""))
        out[str(v["key"])] = value if v.get("raw") else go_os_expand(value, get)
    return out
