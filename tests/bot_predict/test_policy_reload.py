"""SIGHUP: a reloaded policy updates the allocation endpoint's settings and caps (serve and the live bot)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import replace

from prometheus_client import CollectorRegistry

from retry_bot.policy import parse_policy
from retry_bot.predict import JobKey, Observation
from retry_bot.predict.estimator import Clamp, new_index
from retry_bot.predict.settings import DEFAULT_SETTINGS
from retry_bot.predict.sources import clamp_from_policy
from retry_bot.server import AllocationServer

LADDER = """
version = 1
[[runner_classes]]
name = "small"
tags = ["small"]
max_memory = "8Gi"
max_cpus = "{cpus}"
"""


def _variables(srv: AllocationServer) -> dict:
    with urllib.request.urlopen(srv.url + "/v1/allocation?spec=heavy@1.0%25gcc@12.3.0", timeout=10) as r:
        return json.loads(r.read())["variables"]


def test_configure_swaps_settings_and_caps_of_a_running_server():
    index = new_index(DEFAULT_SETTINGS)
    key = JobKey.of({"package": "heavy", "version": "1.0", "compiler": "gcc@12.3.0"})
    for i in range(6):
        index.add(Observation(key=key, at=1_736_000_000.0 + 3600 * i, memory_peak_bytes=3e9, memory_mean_bytes=1e9,
                              cpu_mean_cores=12.0, cpu_max_cores=14.0, job_id=i, ref="develop"), True)
    srv = AllocationServer(index=index, registry=CollectorRegistry(), clamp=Clamp(),
                           clock=lambda: 1_736_100_000.0).start()
    try:
        assert int(_variables(srv)["KUBERNETES_CPU_REQUEST"][:-1]) >= 12000   # no cap yet
        srv.configure(DEFAULT_SETTINGS, clamp_from_policy(parse_policy(LADDER.format(cpus=4))))
        assert _variables(srv)["KUBERNETES_CPU_REQUEST"] == "4000m"
        srv.configure(replace(DEFAULT_SETTINGS, cpu_request_factor=0.5), clamp_from_policy(None))
        assert srv.settings.cpu_request_factor == 0.5 and srv.clamp == Clamp()
    finally:
        srv.close()


def test_the_live_bots_reload_reaches_its_allocation_endpoint(tmp_path):
    from tests.bot_live.farm import Farm, make_bot

    farm = Farm({})
    farm.add_project("grp/d", {})
    bot = make_bot(farm, tmp_path, ["grp/d"], policy=LADDER.format(cpus=4), extra='[http]\nlisten = "127.0.0.1:0"\n')
    try:
        bot.start_http()
        # the live /v1/allocation applies the same caps as serve: memory *and* CPU
        assert bot._http.clamp == clamp_from_policy(bot.policy) and bot._http.clamp.max_cpu_cores == 4.0
        (tmp_path / "policy.toml").write_text(LADDER.format(cpus=16))
        assert bot.reload_policy() is True
        assert bot._http.clamp.max_cpu_cores == 16.0
    finally:
        bot.close()
        farm.close()
