"""Choose the measurement backend for this host.

``auto``: cgroup v2 when the unified hierarchy offers the ``memory``
controller under the configured parent and it is writable; else cgroup v1
when the v1 ``memory`` hierarchy is writable; else the psutil fallback.
``wrapper.toml`` ``[cgroup] backend`` can force one; a forced backend that
cannot work is an error (the driver then exits with the system-failure code).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from runner_wrapper.cgroup.base import Backend, CgroupError
from runner_wrapper.config import CgroupSettings

__all__ = ["Selection", "select_backend", "probe_v2", "probe_v1"]


@dataclass(frozen=True)
class Selection:
    backend: Backend
    #: One line per candidate: why it was taken or passed over.
    reasons: tuple[str, ...]


def _writable_dir(path: str) -> str | None:
    """The directory to create in (the parent itself, or its nearest existing ancestor) if writable."""
    d = path
    while not os.path.isdir(d):
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up
    return d if os.access(d, os.W_OK) else None


def probe_v2(settings: CgroupSettings) -> tuple[bool, str]:
    from runner_wrapper.cgroup.v2 import V2Backend, find_cgroup2_mount

    root = settings.v2_root or find_cgroup2_mount()
    if not root:
        return False, "cgroup v2: no cgroup2 mount"
    b = V2Backend(root, settings.parent)
    ctrl = b.available_controllers()
    if "memory" not in ctrl:
        return False, (f"cgroup v2: {root} does not offer the memory controller "
                       f"(controllers: {' '.join(sorted(ctrl)) or 'none'}; hybrid host?)")
    if not _writable_dir(b.parent_dir):
        return False, f"cgroup v2: {b.parent_dir} is not writable (needs root or a delegated subtree)"
    return True, f"cgroup v2: {root} offers {' '.join(sorted(ctrl))}, parent {b.parent_dir} writable"


def probe_v1(settings: CgroupSettings) -> tuple[bool, str]:
    from runner_wrapper.cgroup.v1 import v1_hierarchies

    h = v1_hierarchies(settings.v1_root)
    if "memory" not in h:
        return False, f"cgroup v1: no memory hierarchy under {settings.v1_root}"
    parent = os.path.join(h["memory"], settings.parent)
    if not _writable_dir(parent):
        return False, f"cgroup v1: {parent} is not writable (needs root)"
    return True, f"cgroup v1: hierarchies {', '.join(sorted(h))}; parent {parent} writable"


def select_backend(settings: CgroupSettings, enforce_memory: bool = True) -> Selection:
    """Pick a backend per ``settings.backend``; raises :class:`CgroupError` when a forced one cannot work."""
    from runner_wrapper.cgroup.fallback import PsutilBackend

    reasons: list[str] = []
    want = settings.backend
    if want in ("auto", "v2"):
        ok, why = probe_v2(settings)
        reasons.append(why)
        if ok:
            from runner_wrapper.cgroup.v2 import V2Backend, find_cgroup2_mount

            return Selection(V2Backend(settings.v2_root or find_cgroup2_mount() or "", settings.parent),
                             tuple(reasons))
        if want == "v2":
            raise CgroupError(f"backend v2 forced in wrapper.toml but unusable: {why}")
    if want in ("auto", "v1"):
        ok, why = probe_v1(settings)
        reasons.append(why)
        if ok:
            from runner_wrapper.cgroup.v1 import V1Backend

            return Selection(V1Backend(settings.v1_root, settings.parent, settings.limit_swap), tuple(reasons))
        if want == "v1":
            raise CgroupError(f"backend v1 forced in wrapper.toml but unusable: {why}")
    reasons.append("psutil: sampling the process tree (approximate)"
                   + (" [forced in wrapper.toml]" if want == "psutil" else ""))
    return Selection(PsutilBackend(enforce_memory=enforce_memory), tuple(reasons))
