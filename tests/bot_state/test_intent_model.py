"""Property test: any sequence of intent operations matches a simple model (SQLite in memory).

The model is the protocol in docs/state.md: a key is created once; a completed intent
never changes; only a retryable failure is re-opened; open intents are exactly the begun ones.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from retry_bot.state import StateError, open_store

KEYS = ["a", "b", "c"]
ops = st.lists(st.tuples(st.sampled_from(["begin", "complete", "fail", "fail_retryable"]),
                         st.sampled_from(KEYS)), max_size=25)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_intents_follow_the_model(sequence):
    store = open_store("sqlite:///:memory:")
    model: dict[str, tuple[str, bool, int]] = {}  # key -> (status, retryable, attempts)
    ids: dict[str, int] = {}
    try:
        for op, key in sequence:
            if op == "begin":
                intent = store.begin_action(key, 1, "retry", {})
                before = model.get(key)
                if before is None:
                    assert intent.created and intent.attempts == 1
                    model[key] = ("begun", False, 1)
                elif before[0] == "failed" and before[1]:
                    assert intent.created and intent.attempts == before[2] + 1
                    model[key] = ("begun", False, before[2] + 1)
                else:
                    assert not intent.created and intent.status == before[0]
                ids[key] = intent.intent_id
                continue
            if key not in ids:
                continue
            before = model[key]
            try:
                if op == "complete":
                    store.complete_action(ids[key], {"ok": True})
                else:
                    store.fail_action(ids[key], "refused", retryable=(op == "fail_retryable"))
            except StateError:
                # Only settled-the-other-way intents refuse: completed can't fail, failed can't complete.
                assert (before[0], op) in {("completed", "fail"), ("completed", "fail_retryable"),
                                           ("failed", "complete")}
                continue
            if op == "complete":
                model[key] = ("completed", False, before[2])
            else:
                model[key] = ("failed", op == "fail_retryable", before[2])
        for key, (status, retryable, attempts) in model.items():
            got = store.get_action(key)
            assert (got.status, got.retryable, got.attempts) == (status, retryable, attempts)
        assert sorted(i.idempotency_key for i in store.open_intents()) == \
            sorted(k for k, v in model.items() if v[0] == "begun")
    finally:
        store.close()
