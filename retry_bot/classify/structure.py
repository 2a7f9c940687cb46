"""Structural evidence in a job trace, beside its words: where the job failed and how.

Pure functions over the raw trace tail (bytes) and the verified usage record:

* the **runner section** the failure happened in (``get_sources``, ``restore_cache``,
  ``step_script``...): the last ``section_start:`` marker GitLab Runner wrote before the end,
  not counting the sections the runner runs *because* the job failed (``after_script``,
  ``upload_artifacts_on_failure``, ``archive_cache_on_failure``, ``cleanup_file_variables``).
  Quoted logs often lost the markers; then the runner's section headers ("Getting source from Git
  repository", "Restoring cache", "Executing "step_script" stage of the job script") in the last
  64 KiB stand in.
  Section names: gitlab-runner ``common/build.go`` (``BuildStage`` constants) and the
  documented list in ``docs/monitoring`` (resolve_secrets, prepare_executor, prepare_script,
  get_sources, clear_worktree, restore_cache, download_artifacts, step_script/build_script,
  after_script, archive_cache, archive_cache_on_failure, upload_artifacts_on_success,
  upload_artifacts_on_failure, cleanup_file_variables).  The Kubernetes executor runs
  get_sources, clear_worktree, restore_cache, download_artifacts, the archive/upload stages and
  cleanup_file_variables in the **helper** container (``executors/kubernetes``
  ``helperStages``): a kill there is the helper's, not the build's.
* whether the trace **ends in the runner's own verdict** (``ERROR: Job failed``);
* the **last command** the job's script echoed (GitLab Runner prints each script line as
  ``$ command``, ``shells/bash.go`` ``echoColoredFormat``);
* the **signal** behind an exit code (``128 + N``: shells report a child killed by signal N so,
  POSIX ``wait`` status convention; 137 = SIGKILL, 143 = SIGTERM);
* whether a verified usage record **covers the failing stage** and counted no OOM kill there;
* the **post-failure output** to set aside (:func:`drop_post_failure_output`): what ``after_script``,
  ``upload_artifacts_on_failure`` and ``archive_cache_on_failure`` printed.  GitLab runs
  ``after_script`` after the script, also after a failed one, and its exit code never changes the
  job's result (GitLab CI YAML reference, ``after_script``: "If after_script fails, the job status
  does not change"; gitlab-runner ``common/build.go`` only logs "after_script failed, but job will
  continue unaffected"); the two ``*_on_failure`` stages run only because the job already failed.
  A Slack hook's DNS error or a failed-job artifact upload's 502 there is never the cause.
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass
from typing import Callable

from retry_bot.classify.trace import clean_line
from runner_wrapper.record import UsageRecord

__all__ = ["Structure", "analyse", "signal_of", "drop_post_failure_output", "drop_post_failure_output_and_markers",
           "drop_superseded_attempts",
           "POST_FAILURE_SECTIONS",
           "HELPER_SECTIONS", "AFTER_FAILURE_OUTPUT_SECTIONS"]

#: Sections the runner runs after the failure (or always at the end): they never hold its cause.
POST_FAILURE_SECTIONS = frozenset({
    "after_script", "upload_artifacts_on_failure", "archive_cache_on_failure", "cleanup_file_variables",
    "upload_artifacts_on_success", "archive_cache",
})
#: Sections the Kubernetes executor runs in the helper container (gitlab-runner executors/kubernetes).
HELPER_SECTIONS = frozenset({
    "get_sources", "clear_worktree", "restore_cache", "download_artifacts", "archive_cache",
    "archive_cache_on_failure", "upload_artifacts_on_success", "upload_artifacts_on_failure",
    "cleanup_file_variables",
})

#: Sections whose output never decides why the job failed (see :func:`drop_post_failure_output`).
AFTER_FAILURE_OUTPUT_SECTIONS = frozenset({"after_script", "upload_artifacts_on_failure", "archive_cache_on_failure"})
#: Where :func:`drop_post_failure_output` looks for the markers: the end of the trace.
_AFTER_FAILURE_BYTES = 64 * 1024
_AFTER_FAILURE_NAMES = frozenset(n.encode("ascii") for n in AFTER_FAILURE_OUTPUT_SECTIONS)
#: Header lines that open such output in quoted logs whose markers were lost (gitlab-runner
#: ``common/build.go``: "Running after_script", "Uploading artifacts for failed job").
#: Each with the lines that end such output: the runner's next section header or its verdict.
_VERDICT_ENDS = (b"\nCleaning up project directory", b"\nERROR: Job failed", b"\nWARNING: Job failed")
_AFTER_FAILURE_HEADERS: tuple[tuple[bytes, tuple[bytes, ...]], ...] = (
    (b"Running after_script", (b"\nUploading artifacts", b"\nWARNING: after_script failed") + _VERDICT_ENDS),
    (b"Uploading artifacts for failed job", _VERDICT_ENDS),
)

_SECTION_START = re.compile(rb"section_start:[0-9]{1,20}:([A-Za-z0-9_.\-]{1,128})")
# Section headers GitLab Runner prints (common/build.go, shells/abstract.go), for quoted logs whose
# markers were lost.  Ordered as the runner runs them.
_HEADERS: tuple[tuple[bytes, str], ...] = (
    (b"Preparing environment", "prepare_script"),
    (b"Getting source from Git repository", "get_sources"),
    (b"Fetching changes", "get_sources"),
    (b"Restoring cache", "restore_cache"),
    (b"Downloading artifacts", "download_artifacts"),
    (b'Executing "step_script" stage of the job script', "step_script"),
    (b'Executing "build_script" stage of the job script', "build_script"),
    (b"Running after_script", "after_script"),
    (b"Uploading artifacts for failed job", "upload_artifacts_on_failure"),
    (b"Cleaning up project directory and file based variables", "cleanup_file_variables"),
)
_COMMAND = re.compile(rb"\$ ([^\r\n]{1,300})")
_RUNNER_VERDICT = re.compile(rb"(?m)^(?:ERROR|WARNING): Job failed[^\r\n]*\s*\Z")
#: :func:`analyse` looks at this many of the last ``$ `` occurrences one by one before searching.
_DOLLAR_WALK = 16
#: Only this much of the end is searched for the verdict and the last command.
_END_BYTES = 64 * 1024


def signal_of(exit_code: int | None) -> int | None:
    """The signal N behind an exit code 128+N (1..64), else None."""
    if exit_code is None or not 129 <= exit_code <= 128 + 64:
        return None
    return exit_code - 128


def signal_name(n: int) -> str:
    try:
        return _signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


@dataclass(frozen=True)
class Structure:
    """What the shape of the trace says about the failure (see the module docstring)."""

    #: Runner section the failure happened in, or None when the trace does not say.
    section: str | None = None
    #: Where the section came from: ``marker`` or ``header``.
    section_source: str | None = None
    #: The trace ends in the runner's own ``ERROR: Job failed ...`` line.
    runner_verdict_last: bool = False
    #: The last ``$ command`` line the script echoed (stripped), if any.
    last_command: str | None = None

    def describe(self) -> str:
        parts = []
        if self.section:
            parts.append(f"failed in runner section {self.section} (from {self.section_source})")
        if self.last_command:
            parts.append(f"last command `{self.last_command[:120]}`")
        if self.runner_verdict_last:
            parts.append("trace ends in the runner's 'Job failed' line")
        return "; ".join(parts)


def analyse(raw: bytes, markers: bool = True, may_occur: Callable[[bytes, int], bool] | None = None) -> Structure:
    """Structural evidence of one raw trace tail (section markers still in it).

    Searches backwards from the end with ``bytes.rfind`` (no regex over the whole tail): this
    runs for every job that reaches the fallback, so it stays in the tens of microseconds.
    ``markers=False`` says that ``raw`` holds no ``section_start:`` (the caller searched already,
    :func:`drop_post_failure_output_and_markers`): the 256 KiB search for the last one is skipped.
    ``may_occur(needle, lo)``: ``False`` only when ``needle`` certainly does not occur wholly inside
    ``raw[lo:]`` (the classifier's :meth:`~retry_bot.classify.trace.TraceText.may_occur`, a necessary
    condition): a runner header it rules out is not searched for.
    """
    section = source = None
    end = len(raw) if markers else -1
    while end >= 0:
        i = raw.rfind(b"section_start:", 0, end)
        if i < 0:
            break
        m = _SECTION_START.match(raw, i)
        if m is not None:
            name = m.group(1).decode("ascii", "replace")
            if name not in POST_FAILURE_SECTIONS:
                section, source = name, "marker"
                break
        end = i
    tail = raw[-_END_BYTES:]
    if section is None:
        best = -1
        lo = len(raw) - len(tail)
        for needle, name in _HEADERS:
            if may_occur is not None and not may_occur(needle, lo):
                continue  # rfind would return -1
            i = tail.rfind(needle, best + 1)
            if i > best and name not in POST_FAILURE_SECTIONS:
                best, section, source = i, name, "header"
    last_cmd = None
    # plain "$ cmd" lines (quoted logs) or the runner's green echo "\x1b[32;1m$ cmd\x1b[0;m"; both hold
    # "$ ", searched once first (one scan instead of two where no script line was echoed)
    k = tail.rfind(b"$ ")
    if k >= 0:
        # The two forms cannot overlap, so the command starts after the latest "$ " that follows a
        # newline or the colour code: walk back over the last few "$ ", else search for each form.
        start = -1
        for _ in range(_DOLLAR_WALK):
            if tail[k - 1:k] == b"\n" or (k >= 6 and tail.startswith(b"[32;1m", k - 6)):
                start = k
                break
            k = tail.rfind(b"$ ", 0, k + 1)
            if k < 0:
                break
        else:
            i = tail.rfind(b"\n$ ", 0, k + 2)
            j = tail.rfind(b"[32;1m$ ", 0, k + 2)
            start = j + 6 if j > i else (i + 1 if i >= 0 else -1)
        if start < 0 and tail.startswith(b"$ "):
            start = 0
        if start >= 0:
            m = _COMMAND.match(tail, start)
            if m is not None:
                last_cmd = clean_line(m.group(1)).decode("utf-8", "replace").strip() or None
    last = tail[-4096:]
    verdict = False
    if b"Job failed" in last:
        # A match starts on the last non-blank line (what follows it is blank to the end): search from there.
        q = len(last.rstrip())
        verdict = bool(_RUNNER_VERDICT.search(last, last.rfind(b"\n", 0, q) + 1))
    return Structure(section, source, verdict, last_cmd)


def drop_post_failure_output(raw: bytes) -> bytes:
    """``raw`` without the output of the sections that run after the failure (module docstring).

    With ``section_start:``/``section_end:`` markers, the lines between the markers of
    ``after_script``, ``upload_artifacts_on_failure`` and ``archive_cache_on_failure`` go; the
    markers themselves stay, so :func:`analyse` still sees the sections.  Without markers, the
    lines after a "Running after_script" or "Uploading artifacts for failed job" header up to the
    runner's next header or verdict go.  Both are looked for in the last 64 KiB only (the sections
    are the job's last).  Everything else (the script's output, the runner's final
    ``ERROR: Job failed ...`` line, ``upload_artifacts_on_success``) stays.  Returns ``raw`` itself
    when there is nothing to drop (the common case costs a few ``bytes.find`` calls).
    """
    return drop_post_failure_output_and_markers(raw)[0]


#: GitLab Runner's lines about attempts it made again (gitlab-runner d79f3e7b): the per-attempt image pull
#: warnings (docker executor: executors/docker/internal/pull/manager.go:157 'Failed to pull image with policy %q:
#: %v' and :410 'Failed to pull image %q (attempt #%d), retrying: %v'; Kubernetes executor:
#: executors/kubernetes/internal/pull/manager.go:66 'Failed to pull image %q for container %q with policy %q: %v')
#: and the executor's preparation attempts (common/build.go:1362 'Preparation failed: %v', then :1363 'Will be
#: retried in ...').  Each is followed by the next attempt or pull policy; when every attempt fails, the runner's
#: final 'Job failed (system failure): %v' / 'Job failed: failed to pull image %q with specified policies %v: %v'
#: line repeats the last cause, so these lines themselves never need to decide.
_SUPERSEDED = re.compile(
    rb'(?m)^[^\n]{0,60}(?:WARNING: Failed to pull image (?:with policy "|"[^"\n]{1,400}" '
    rb'(?:\(attempt #|for container "[^"\n]{1,100}" with policy "))|ERROR: Preparation failed: )[^\n]*(?:\n|\Z)')
#: the runner prints them while it prepares the executor, in the first lines of the job's log
_SUPERSEDED_BYTES = 32 * 1024
#: the headers of the stages after the executor's preparation (common/build.go:774-775 GetStageDescription, and
#: the script's 'Executing "step_script" stage of the job script')
_PAST_PREPARATION = (b"Preparing environment", b"Getting source from Git repository", b" stage of the job script")


#: GitHub Actions' runner retries a failed ``docker pull`` of the job container, a service or a Docker
#: action's image (actions/runner src/Runner.Worker/ContainerOperationProvider.cs:214, ActionManager.cs:954:
#: '##[warning]Docker pull failed with exit code N, back off S seconds before retry.'; the web view prints
#: 'Warning: ...'): one attempt is its '/usr/bin/docker pull IMAGE' line, the daemon's error and that warning
_ACTIONS_PULL_ATTEMPT = re.compile(
    rb'(?m)^[^\n]{0,60}/docker pull [^\n]*\n(?:[^\n]*\n){0,20}?[^\n]{0,60}(?:##\[warning\]|Warning: )'
    rb'Docker pull failed with exit code -?[0-9]+, back off [^\n]*(?:\n|\Z)')
#: ... and when every attempt failed it ends the step with the same words and no back-off (:225, :963)
_ACTIONS_PULL_FAILED = re.compile(rb'(?m)Docker pull failed with exit code -?[0-9]+\s*$')
#: the job got past the pulls: a service's health wait (ContainerOperationProvider.cs:112) or a step's 'Run'
_ACTIONS_PAST_PULLS = (b"##[group]Waiting for all services to be ready", b"##[group]Run ")


def _drop_attempts_got_past(raw: bytes, attempt: re.Pattern[bytes], past: tuple[bytes, ...],
                            failed: re.Pattern[bytes] | None = None) -> bytes:
    """``raw`` without the ``attempt`` lines of its first :data:`_SUPERSEDED_BYTES` (to the end of the line
    there), if the job got past the last of them: one of ``past`` follows it and ``failed`` (the runner's
    own "every attempt failed" line) does not.  Otherwise ``raw`` itself."""
    end = raw.find(b"\n", _SUPERSEDED_BYTES)
    end = len(raw) if end < 0 else end + 1
    last = None
    for last in attempt.finditer(raw, 0, end):
        pass
    # a log that stops at them (whole, or quoted only that far) keeps them
    if (last is None or (failed is not None and failed.search(raw, last.end()) is not None)
            or not any(raw.find(h, last.end()) >= 0 for h in past)):
        return raw
    return attempt.sub(b"", raw[:end]) + raw[end:]


def _drop_superseded_actions_pulls(raw: bytes) -> bytes:
    """GitHub Actions' counterpart of :func:`drop_superseded_attempts`: a whole log (the runner's 'Set up job'
    opens with "Current runner version: 'V'", JobExtension) whose first 32 KiB hold pull attempts the runner
    retried (:data:`_ACTIONS_PULL_ATTEMPT`) and then got past (no final :data:`_ACTIONS_PULL_FAILED` line after
    them, a later :data:`_ACTIONS_PAST_PULLS`) loses those attempts: the registry's 503, Docker Hub's
    toomanyrequests or a reset that a later attempt overcame does not decide a job that failed in its steps."""
    if raw.find(b"Docker pull failed with exit code", 0, _SUPERSEDED_BYTES) < 0:
        return raw
    return _drop_attempts_got_past(raw, _ACTIONS_PULL_ATTEMPT, _ACTIONS_PAST_PULLS, _ACTIONS_PULL_FAILED)


def drop_superseded_attempts(raw: bytes) -> bytes:
    """``raw`` without GitLab Runner's lines about attempts it made again (:data:`_SUPERSEDED`).

    A pull policy that failed before a later one found the image (``always`` then ``if-not-present``:
    'Using locally found image version due to "if-not-present" pull policy'), a pull attempt the runner
    retried, or a preparation it retried leaves a line naming a registry fault, a missing tag, refused
    credentials or a daemon error in a job that then ran and failed for its own reason; if the attempts
    failed for good, the runner's final line says so with the same cause.  They are dropped only when a
    stage header follows the last of them (:data:`_PAST_PREPARATION`): the job got past them.  Only a log that opens with the
    runner's first line ('Running with gitlab-runner VERSION (REVISION)', common/build.go:2390,
    common/version.go:53) is searched, and only its first 32 KiB: the prepare section follows that line,
    and a tail cut from a longer log (or a quoted excerpt) has neither.  A whole GitHub Actions log (its
    'Set up job' opens with "Current runner version: 'V'") gets the same treatment for the docker pulls its
    runner retried (:func:`_drop_superseded_actions_pulls`).  Returns ``raw`` itself when there is nothing
    to drop."""
    if raw.find(b"Running with gitlab-", 0, 1024) < 0:
        if raw.find(b"Current runner version: '", 0, 1024) >= 0:
            return _drop_superseded_actions_pulls(raw)
        return raw
    if (raw.find(b"WARNING: Failed to pull image", 0, _SUPERSEDED_BYTES) < 0
            and raw.find(b"ERROR: Preparation failed: ", 0, _SUPERSEDED_BYTES) < 0):
        return raw
    # superseded only if the job got past them: a later stage header
    return _drop_attempts_got_past(raw, _SUPERSEDED, _PAST_PREPARATION)


def drop_post_failure_output_and_markers(raw: bytes) -> tuple[bytes, bool]:
    """:func:`drop_post_failure_output`, and whether ``raw`` holds a ``section_start:`` marker at all
    (when it does not, neither does the result: :func:`analyse` with ``markers=False`` skips its search)."""
    spans: list[tuple[int, int]] = []
    markers = raw.rfind(b"section_start:") >= 0  # (rfind: about twice as fast as a forward search)
    if markers:
        for m in _after_failure_markers(raw):
            body = raw.find(b"\n", m.end()) + 1
            if body <= 0:
                continue
            stops = [k for k in (raw.find(b"section_end:", body), raw.find(b"section_start:", body)) if k >= 0]
            if stops:
                # the marker starts its own line: the body ends at the line before it
                stop = raw.rfind(b"\n", body, min(stops)) + 1 or body
            else:
                stop = _verdict_or_end(raw, body)
            if stop > body:
                spans.append((body, stop))
    else:
        for header, header_ends in _AFTER_FAILURE_HEADERS:
            start = max(0, len(raw) - _AFTER_FAILURE_BYTES)
            # (an rfind first: about twice as fast as a forward search when the header is absent)
            i = raw.find(header, start) if raw.rfind(header, start) >= 0 else -1
            if i < 0 or (i > 0 and raw[i - 1:i] != b"\n"):
                continue
            body = raw.find(b"\n", i)
            if body < 0:
                continue
            ends = [k for k in (raw.find(e, body) for e in header_ends) if k >= 0]
            end = (min(ends) + 1) if ends else len(raw)
            if end > body + 1:
                spans.append((body + 1, end))
    if not spans:
        return raw, markers
    spans.sort()
    out, at = [], 0
    for a, b in spans:
        if a < at:
            a = at
        if b <= a:
            continue
        out.append(raw[at:a])
        at = b
    out.append(raw[at:])
    return b"".join(out), markers


def _after_failure_markers(raw: bytes) -> list[re.Match[bytes]]:
    """The ``section_start:`` markers of :data:`AFTER_FAILURE_OUTPUT_SECTIONS` in ``raw``, in order.

    Looks for the section names (``bytes.find``) rather than walking every marker: a long build
    opens thousands of sections, and this runs for every job.  Only the last
    :data:`_AFTER_FAILURE_BYTES` are searched: these sections are the job's last, and the text
    stages read no further back than that either (``oom_signature``'s 64 KiB)."""
    found = []
    for name in _AFTER_FAILURE_NAMES:
        tag = b":" + name
        pos = max(0, len(raw) - _AFTER_FAILURE_BYTES)
        while True:
            i = raw.find(tag, pos)
            if i < 0:
                break
            pos = i + len(tag)
            j = raw.rfind(b"section_start:", max(0, i - 40), i)
            m = _SECTION_START.match(raw, j) if j >= 0 else None
            if m is not None and m.group(1) == name:
                found.append(m)
    found.sort(key=lambda m: m.start())
    return found


def _verdict_or_end(raw: bytes, lo: int) -> int:
    """Where the runner's ``ERROR: Job failed`` line starts after ``lo``, else the end of ``raw``."""
    k = raw.find(b"\nERROR: Job failed", lo)
    return k + 1 if k >= 0 else len(raw)


def record_covers_failure(record: UsageRecord | None) -> tuple[bool, str | None]:
    """Does ``record`` cover the stage that failed, and what does it say there?

    It covers it when one of its per-stage entries exited non-zero (the failing stage) and the
    record was not truncated, or, without per-stage entries, when the record's own exit code is
    non-zero.  Returns ``(covers, stage name or None)``.
    """
    if record is None:
        return False, None
    failing = [s for s in record.stages if s.exit_code not in (None, 0)]
    if failing:
        return True, failing[-1].name
    if not record.stages and record.exit_code not in (None, 0):
        return True, None
    return False, None
