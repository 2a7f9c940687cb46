"""GitLab Runner's variable expansion, for the stand-in's runner side and tests.

The runner expands every job variable that is not ``raw`` before the job sees it
(R ``common/variables.go``: ``JobVariables.Expand`` -> ``ExpandValue`` ->
``os.Expand(value, b.Get)``): ``$$`` becomes ``$``, the shell's special parameters
(``$?``, ``$1``...) vanish, ``${}`` and an unterminated ``${`` are eaten, a ``$``
followed by no name (``$(``, ``$ ``, a trailing ``$``) is left as it is, and a
name is the **last** variable of that name (a file variable: its path).

There is one transcription of that code, in the runner emulation
(:mod:`standin.runner`, which cites the sources); this module gives the
stand-in's callers its names, so the bot's byte-for-byte proof and the demo's runner
cannot expand differently.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from standin.runner import _variables_get, expand_variables, go_expand

__all__ = ["go_os_expand", "runner_get", "runner_expand"]

#: Go's ``os.Expand(s, mapping)`` (Go ``src/os/env.go``).
go_os_expand: Callable[[str, Callable[[str], str]], str] = go_expand


def runner_get(variables: Sequence[Mapping[str, Any]]) -> Callable[[str], str]:
    """R ``JobVariables.Get``: the last definition wins; ``$`` and special parameters as above."""
    return _variables_get(variables)


def runner_expand(variables: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The job's environment after R ``JobVariables.Expand`` (non-raw values expanded; last key wins)."""
    items = [dict(v, value=str(v.get("value", ""))) for v in variables]
    return {str(v["key"]): str(v["value"]) for v in expand_variables(items)}
