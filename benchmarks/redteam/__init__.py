"""Red-team probes for the failure classifier (issue 11, tenth and eleventh passes).

Job-log tails written from the tools' own output formats (never copied from a labelled split), each
``(id, wanted family, trace[, exit code[, failure_reason]])``:

* ``precision_1`` .. ``precision_8``: deterministic failures (and a few configuration ones) that share
  words with transient or OOM messages: a wasted re-run if the bot retries or resizes them;
* ``recall``: transient infrastructure failures and OOM kills across ecosystems, plus traps.

``benchmarks/score_redteam.py`` scores them with the shipped policy.
"""
