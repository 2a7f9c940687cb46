"""Red-team probes for the failure classifier (issue 11, tenth and eleventh passes).

Job-log tails written from the tools' own output formats (never copied from a labelled split), each
``(id, wanted family, trace[, exit code[, failure_reason]])``:

* ``precision_1`` .. ``precision_8``: deterministic failures (and a few configuration ones) that share
  words with transient or OOM messages: a wasted re-run if the bot retries or resizes them;
* ``recall``: transient infrastructure failures and OOM kills across ecosystems, plus traps.

``benchmarks/score_redteam.py`` scores them with the shipped policy.
"""

#: what every probe's job log opens with: GitLab's step_script section and its header
SS = 'section_start:1700000000:step_script\r\x1b[0KExecuting "step_script" stage of the job script\n'
def job(cmd, body, code=1, after=True):
    """A GitLab job log: the script section running ``cmd`` with ``body`` as its output, the cleanup
    section (``after``), and the runner's ``ERROR: Job failed: exit code`` line."""
    t = SS + f"\x1b[32;1m$ {cmd}\x1b[0;m\n" + body.strip("\n") + "\n"
    t += "section_end:1700000100:step_script\r\x1b[0K\n"
    if after:
        t += "section_start:1700000100:cleanup_file_variables\r\x1b[0KCleaning up project directory and file based variables\nsection_end:1700000101:cleanup_file_variables\r\x1b[0K\n"
    t += f"ERROR: Job failed: exit code {code}\n"
    return t
