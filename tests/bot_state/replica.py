"""A tiny bot replica for the crash and failover tests (run as ``python -m tests.bot_state.replica``).

It makes ``--actions`` GitLab "writes" (appending ``KEY HOLDER`` lines to the
``--gitlab`` file, fsynced) through the intent protocol, optionally as an
elected leader, and can stop forever (to be SIGKILLed) or pause at one point.
It prints one status word per line: LEADER, RECONCILE, PAUSED, MID, DONE, FENCED.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from retry_bot.state import LeadershipLost, open_store, perform_once, resume_intent


def say(*words: object) -> None:
    print(*words, flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--holder", default=f"replica-{os.getpid()}")
    p.add_argument("--gitlab", required=True)
    p.add_argument("--actions", type=int, default=5)
    p.add_argument("--elect", action="store_true")
    p.add_argument("--ttl", type=float, default=2.0)
    p.add_argument("--stop-before-write", default=None, help="key: begin, then hang before the write")
    p.add_argument("--stop-after-write", default=None, help="key: write, then hang before completing")
    p.add_argument("--pause-after-write", type=float, default=None,
                   help="with --stop-after-write: sleep this long, then go on (instead of hanging)")
    p.add_argument("--race", type=int, default=None, help="only begin N keys and print those created")
    args = p.parse_args()

    store = open_store(args.url)
    if args.race is not None:
        for i in range(args.race):
            intent = store.begin_action(f"race:{i}", i + 1, "retry", {})
            if intent.created:
                say("CREATED", intent.idempotency_key)
        say("DONE")
        return 0

    def observe(intent):
        with open(args.gitlab) as f:
            for line in f:
                key, holder = line.split()
                if key == intent.idempotency_key:
                    return {"written_by": holder}
        return None

    def perform(intent):
        key = intent.idempotency_key
        if key == args.stop_before_write:
            say("PAUSED", key)
            time.sleep(3600)
        fd = os.open(args.gitlab, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{key} {args.holder}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if key == args.stop_after_write:
            say("MID", key)
            time.sleep(args.pause_after_write if args.pause_after_write is not None else 3600)
        return {"written_by": args.holder}

    try:
        if args.elect:
            while not store.try_acquire_leadership(args.holder, args.ttl):
                time.sleep(0.05)
            say("LEADER", store.leadership_term)
        for intent in store.open_intents():
            say("RECONCILE", intent.idempotency_key)
            resume_intent(store, intent, perform, observe)
        for i in range(args.actions):
            perform_once(store, f"act:{i}", 1000 + i, "retry", {"i": i}, perform=perform, observe=observe)
            if args.elect and not store.renew_leadership(args.holder):
                say("FENCED", "renew")
                return 3
    except LeadershipLost as exc:
        say("FENCED", str(exc).replace("\n", " "))
        return 3
    say("DONE")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
