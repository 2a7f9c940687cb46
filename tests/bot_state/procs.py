"""Child processes with line-by-line status output, for crash and failover tests."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time


class Child:
    def __init__(self, args: list[str], env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.bot_state.replica", *args], env=env, cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, word: str, timeout: float = 20.0) -> str:
        """The first (new) line starting with ``word``; fails with the child's stderr if it never comes."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.01, left))
            except queue.Empty:
                line = ""
            if line is None or left <= 0:
                self.kill()
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"child never printed {word!r}; saw {self.seen}; stderr:\n{err[-3000:]}")
            if line:
                self.seen.append(line)
                if line.split()[0] == word:
                    return line

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            self.proc.wait(timeout=10)

    def finish(self, timeout: float = 20.0) -> int:
        rc = self.proc.wait(timeout=timeout)
        while True:
            try:
                line = self.lines.get(timeout=2)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
        return rc
