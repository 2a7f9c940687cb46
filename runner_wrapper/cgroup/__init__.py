"""Measurement backends behind one small interface.

- :mod:`.v2`: the unified hierarchy (``memory.peak``, ``memory.events``, ``cpu.stat``, ``cgroup.kill``);
- :mod:`.v1`: the legacy ``memory`` + ``cpu`` + ``cpuacct`` hierarchies;
- :mod:`.fallback`: psutil sampling of the process tree where no cgroup can be made.

Every backend hands out :class:`~runner_wrapper.cgroup.base.Group` objects for
relative paths below the configured parent (``job-42``, ``job-42/build_script-1``).
:func:`~runner_wrapper.cgroup.detect.select_backend` chooses one.
"""

from runner_wrapper.cgroup.base import Backend, CgroupError, Counters, Group, Sample

__all__ = ["Backend", "CgroupError", "Counters", "Group", "Sample"]
