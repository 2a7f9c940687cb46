"""What-if replay of a job trace through the live bot's predictor and ``decide()``.

One module per concept (import from them; this package re-exports nothing):

* :mod:`retry_bot.simulate.trace`: the trace and allocation-file formats (reading, writing);
* :mod:`retry_bot.simulate.allocators`: ours (the predictor, retries through ``decide()``)
  and the allocator protocol;
* :mod:`retry_bot.simulate.baselines`: spack-gantry, a VPA recommender, the static sizes;
* :mod:`retry_bot.simulate.replay`: the causal replay;
* :mod:`retry_bot.simulate.metrics`: ``evaluate.py``'s metrics.

Dependencies point one way: ``simulate`` uses ``predict``, ``policy`` and ``decide``; none of
them imports ``simulate``.
"""
