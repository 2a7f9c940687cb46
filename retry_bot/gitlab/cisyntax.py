"""GitLab's CI syntax, read once for the bot and the stand-in: ``!reference`` tags, the ``extends`` merge.

Pure functions.  Each rule cites GitLab's source (``G`` = gitlab-org/gitlab).  The bot's job
re-creation (:mod:`retry_bot.gitlab.jobdef`) picks one job out of a configuration with them; the
stand-in (:mod:`standin.gitlab.ciconfig`) builds whole pipelines with them.  Kept out of
the stand-in package so the live bot never imports the emulation (its server, GraphQL schema).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping

import yaml

__all__ = [
    "CiConfigError",
    "ExtendsResolver",
    "GLOBAL_KEYWORDS",
    "EXTENDS_MAX_NESTING",
    "deep_merge",
    "parse_yaml",
    "resolve_references",
]

#: Top-level keys of a CI configuration that are not jobs (G lib/gitlab/ci/config/entry/root.rb).
GLOBAL_KEYWORDS = frozenset({"stages", "variables", "default", "workflow", "include", "image", "services",
                             "cache", "before_script", "after_script", "spec", "types"})
#: At most this many ancestors along one ``extends`` chain
#: (G lib/gitlab/ci/config/extendable/entry.rb: ``nesting_too_deep?`` is ``ancestors.count > MAX_NESTING_LEVELS``, 10).
EXTENDS_MAX_NESTING = 10


class CiConfigError(ValueError):
    """The CI configuration is invalid, or uses syntax the stand-in does not model."""


class _Reference:
    """A ``!reference [job, key, ...]`` tag, resolved after ``include`` and ``extends``."""

    def __init__(self, path: list[str]) -> None:
        self.path = path


class _CiLoader(yaml.SafeLoader):
    """PyYAML's safe loader plus GitLab's ``!reference`` tag."""


def _construct_reference(loader: yaml.SafeLoader, node: yaml.Node) -> _Reference:
    if not isinstance(node, yaml.SequenceNode):
        raise CiConfigError("!reference needs a list: !reference [job, key]")
    return _Reference([str(loader.construct_scalar(n)) for n in node.value])  # type: ignore[arg-type]


_CiLoader.add_constructor("!reference", _construct_reference)


def parse_yaml(text: str, where: str) -> Any:
    """YAML text with GitLab's ``!reference`` tags kept for :func:`resolve_references`; any document."""
    try:
        return yaml.load(text, Loader=_CiLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise CiConfigError(f"{where} is not valid YAML: {exc}") from None


def resolve_references(node: Any, top: Callable[[str], Any]) -> Any:
    """``node`` with every ``!reference [key, ...]`` replaced by what it names, after ``extends``.

    ``top(key)`` gives a top-level entry of the configuration with its ``extends`` resolved (raises
    ``KeyError`` when there is none): GitLab resolves tags after ``extends``
    (G lib/gitlab/ci/config.rb ``build_config``: external processor, then ``Extendable``, then
    ``Yaml::Tags::Resolver``).
    """
    def lookup(ref: _Reference, depth: int) -> Any:
        missing = CiConfigError(f"!reference [{', '.join(ref.path)}] could not be found")
        if not ref.path:
            raise missing
        try:
            found: Any = top(ref.path[0])
        except KeyError:
            raise missing from None
        for key in ref.path[1:]:
            if not isinstance(found, Mapping) or key not in found:
                raise missing
            found = found[key]
        return resolve(found, depth + 1)

    def resolve(node: Any, depth: int) -> Any:
        if depth > 10:
            raise CiConfigError("!reference nesting is too deep (more than 10 levels)")
        if isinstance(node, _Reference):
            return lookup(node, depth)
        if isinstance(node, Mapping):
            return {k: resolve(v, depth) for k, v in node.items()}
        if isinstance(node, list):
            out: list[Any] = []
            for item in node:
                was_reference = isinstance(item, _Reference)
                value = resolve(item, depth)
                if was_reference and isinstance(value, list):
                    out.extend(value)        # GitLab flattens a referenced list into the enclosing one
                else:
                    out.append(value)
            return out
        return node

    return resolve(node, 0)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """GitLab's ``extends``/``include`` merge: hashes merge deeply, everything else is replaced
    (G lib/gitlab/ci/config/extendable/entry.rb ``deep_merge``)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class ExtendsResolver:
    """Resolves ``extends`` one entry at a time, each entry once (G lib/gitlab/ci/config/extendable/entry.rb).

    ``resolver(name)`` is the entry with its ancestors deep-merged in order, without the ``extends``
    key.  Raises :class:`CiConfigError` for an unknown ancestor, a cycle, or a chain with more than
    :data:`EXTENDS_MAX_NESTING` ancestors (GitLab: "nesting too deep in `extends`"), counted from
    whichever entry starts the chain, as GitLab checks every job's own chain.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self._done: dict[str, tuple[dict[str, Any], int]] = {}  # name -> (merged, levels of ancestors)

    def __call__(self, name: str) -> dict[str, Any]:
        return self._resolve(name, ())[0]

    def _too_deep(self, chain: tuple[str, ...]) -> CiConfigError:
        return CiConfigError(f"{chain[0]}: nesting too deep in `extends` (more than {EXTENDS_MAX_NESTING} levels)")

    def _resolve(self, name: str, chain: tuple[str, ...]) -> tuple[dict[str, Any], int]:
        if name in chain:
            raise CiConfigError(f"circular 'extends' through {' -> '.join(chain + (name,))}")
        if len(chain) > EXTENDS_MAX_NESTING:
            raise self._too_deep(chain)
        done = self._done.get(name)
        if done is None:
            job = self.data.get(name)
            if not isinstance(job, Mapping):
                raise CiConfigError(f"'extends' refers to unknown job {name!r}")
            parents = job.get("extends", [])
            parents = [parents] if isinstance(parents, str) else list(parents)
            merged: dict[str, Any] = {}
            height = 0
            for parent in parents:
                base, levels = self._resolve(str(parent), chain + (name,))
                merged = deep_merge(merged, base)
                height = max(height, levels + 1)
            done = (deep_merge(merged, {k: v for k, v in job.items() if k != "extends"}), height)
            self._done[name] = done
        if len(chain) + done[1] > EXTENDS_MAX_NESTING:  # a chain below ``name``, resolved before, is too long from here
            raise self._too_deep(chain + (name,))
        return done
