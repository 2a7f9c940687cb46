"""The learned fallback (retry_bot/classify/learned.py): features, the model, the gate, the artifact,
and the shipped policy's caution (docs/taxonomy.md, "Sixth pass: learned fallback")."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retry_bot.classify import classify, taxonomy_from_text
from retry_bot.classify.learned import (LAST_BYTES, LAST_LINES, MODEL_FORMAT, MODEL_RESOURCE, LearnedModel,
                                        consult, default_model, features, is_word, last_lines, line_words)
from retry_bot.classify.trace import TraceText
from retry_bot.classify.structure import Structure, analyse
from retry_bot.classify.train import (DEFAULT_OPTIONS, READ_SPLITS, fit_logistic, load_split, main as train_main,
                                     to_json, train)
from retry_bot.decide import Action, ClassUsage, decide
from retry_bot.model import Classification, Family
from retry_bot.policy import default_policy
from retry_bot.policy.load import parse_policy
from retry_bot.problems import ConfigError

from .conftest import decided, facts, usage_record

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "joblogs"
NONE = Structure()
#: The blind splits not yet read, which may neither train the model nor be loaded by eval_learned (the next one is
#: being collected; the lead adds its file when it lands, this refusal needs no file).
UNSEEN: tuple[str, ...] = ("heldout-zzk", "heldout-zzl")


# ------------------------------------------------------------------ words and masking

def feats(raw: bytes, **kw) -> set[str]:
    kw.setdefault("failure_reason", None)
    kw.setdefault("exit_code", None)
    return features(TraceText(raw), structure=kw.pop("structure", analyse(raw)), **kw)


def test_words_are_lower_case_letter_runs_and_hashes_leave_nothing():
    assert line_words(b"Fetching https://Registry.NPMJS.org/left-pad FAILED") == [
        "fetching", "https", "registry", "npmjs", "org", "left", "pad", "failed"]
    assert line_words(b"/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus killed") == [
        "usr", "lib", "gcc", "linux", "gnu", "plus", "killed"]  # digits split words; "cc" is hex-like
    # a digest or commit hash leaves only runs of one or two hex letters, which are not words
    assert line_words(b"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08") == ["sha", "feaa"]
    assert not is_word(b"ad") and is_word(b"ld") and is_word(b"go") and not is_word(b"x" * 41)


def test_numbers_count_only_as_exit_codes_and_http_statuses_in_the_last_lines():
    f = feats(b"HTTP 503 after 4096 bytes, line 1234, exit code 137\n")
    assert {"#503", "#137"} <= f and not {x for x in f if x.startswith("#") and x not in ("#503", "#137")}
    assert "#404" not in feats(b"version 1.404.2 (build 404123)\n")


def test_structural_features_come_from_the_engines_structure():
    raw = (b"section_start:1:get_sources\r\x1b[0K\n\x1b[32;1m$ CC=gcc ./gradlew build\x1b[0;m\n"
           b"ERROR: Job failed: exit code 137\n")
    f = feats(raw, failure_reason="Script_Failure", exit_code=137)
    assert {"s:reason=script_failure", "s:exit=137", "s:signal=SIGKILL", "s:section=get_sources",
            "s:tool=gradlew", "s:runner_verdict_last"} <= f
    f = feats(b"boom\n", structure=NONE)
    assert {"s:reason=none", "s:exit=none", "s:section=none"} <= f and not any(x.startswith("s:tool") for x in f)
    assert "s:exit=other" in feats(b"x\n", exit_code=77)


def test_the_last_lines_weigh_twice_and_only_the_end_is_read():
    raw = b"zebraword early\n" + b"filler line\n" * 4000 + b"\n\nfinal words here\n"
    f = feats(raw)
    assert "zebraword" not in f  # before the last 32 KiB
    assert {"final", "$final", "$filler", "filler"} <= f
    assert len([x for x in f if x.startswith("$")]) == len({"$filler", "$line", "$final", "$words", "$here"})
    assert last_lines(b"a\n" + b"x" * (LAST_BYTES + 10) + b"\nend\n")[-1] == b"end"
    assert len(last_lines(b"l1\nl2\n\nl3\nl4\nl5\nl6\nl7\n")) == LAST_LINES


def test_usage_record_markers_are_not_read_as_text():
    raw = b"RIGHTSIZER-USAGE v1 b29tX2tpbGxzIG1lbW9yeSBwZWFrOiBiaWc\nzebra end\n"
    f = feats(raw)
    assert not {t for t in f if "rightsizer" in t or "usage" in t} and {"zebra", "$zebra"} <= f


# ------------------------------------------------------------------ the model

CASES = [
    {"family": "oom", "excerpt": "cc1plus killed signal terminated program out of memory"},
    {"family": "oom", "excerpt": "java heap space out of memory killed"},
    {"family": "infrastructure", "excerpt": "connection reset by peer while fetching registry"},
    {"family": "infrastructure", "excerpt": "503 service unavailable registry connection reset"},
    {"family": "build_error", "excerpt": "undefined reference to symbol compile error"},
    {"family": "build_error", "excerpt": "assertion failed test compile error expected"},
    {"family": "config_error", "excerpt": "permission denied forbidden token invalid"},
    {"family": "config_error", "excerpt": "forbidden token missing variable permission"},
    {"family": "timeout", "excerpt": "execution took longer than timeout exceeded"},
    {"family": "timeout", "excerpt": "timeout exceeded deadline took longer"},
    {"family": "unknown", "excerpt": "not learned: unknown and canceled are never classes"},
]
OPTIONS = {"C": 1.0, "iterations": 50, "min_df": 1, "min_words": 2}


def test_training_is_deterministic_and_round_trips_through_json():
    a, b = train(CASES, OPTIONS, ("x",)), train(list(CASES), dict(OPTIONS), ("x",))
    assert to_json(a) == to_json(b)
    assert json.loads(to_json(a)) == json.loads(json.dumps(a))
    assert a["cases"] == 10 and "unknown" not in a["classes"]
    model = LearnedModel(json.loads(to_json(a)))
    out = model.predict(feats(b"cc1plus killed out of memory\n", structure=NONE))
    assert out.family == "oom" and 0.5 < out.probability <= 1.0 and "killed" in out.top_features
    assert abs(sum(out.posterior.values()) - 1.0) < 1e-9


def test_only_read_splits_may_train():
    # F, G and H were read by the seventh pass, I by the eighth, J by the ninth, K by the twelfth, L by the
    # thirteenth, M by the fourteenth, N by the fifteenth, O and P by the sixteenth; a split collected after
    # them, Q by the seventeenth, R by the eighteenth, S by the nineteenth, T by the twentieth, U by the twenty-first, V by the twenty-second, W by the twenty-third, X by the twenty-fourth; a split collected after them (Y...) stays unseen (refused before
    # any file is opened, even one that does not exist yet)
    for sealed in UNSEEN:
        with pytest.raises(ValueError, match="may not train"):
            load_split(DATA, sealed)
    with pytest.raises(SystemExit):
        train_main(["--split", UNSEEN[0]])
    assert not set(UNSEEN) & set(READ_SPLITS)
    assert {"heldout-f", "heldout-g", "heldout-h", "heldout-i", "heldout-j", "heldout-k", "heldout-l",
            "heldout-m", "heldout-n", "heldout-o", "heldout-p", "heldout-q", "heldout-r", "heldout-s", "heldout-t", "heldout-u",
            "heldout-v", "heldout-w", "heldout-x", "heldout-y", "heldout-z"} <= set(READ_SPLITS)


def test_shipped_artifact_is_what_the_training_script_produces(tmp_path):
    out = tmp_path / "model.json"
    assert train_main(["--data", str(DATA), "--out", str(out)]) == 0
    shipped = (ROOT / "retry_bot" / "classify" / MODEL_RESOURCE).read_text("utf-8")
    assert out.read_text("utf-8") == shipped, "regenerate: python -m retry_bot.classify.train --out retry_bot/classify/learned_model.json"
    data = json.loads(shipped)
    # the vocabulary grows with the read splits (min_df 2): 399,342 characters with cases to Y, 407,559 with Z
    # (twenty-sixth pass, naive Bayes), 379,742 as a logistic regression (twenty-seventh pass, same features),
    # 505,424 with cases to ZX (forty-third pass: the bound, 500,000 until then, raised to 600,000 for the
    # vocabulary's growth alone); the bound stays a sanity check on the artifact's size, not a tuning knob
    assert data["trained_on"] == list(READ_SPLITS) and len(shipped) < 600_000
    assert data["format"] == MODEL_FORMAT == 3 and data["options"] == dict(DEFAULT_OPTIONS)
    assert default_model().version == data["version"]


def test_an_artifact_of_another_format_is_refused_with_a_clear_message():
    data = train(CASES, OPTIONS, ("x",))
    old = {k: v for k, v in data.items() if k not in ("bias", "weights")}
    old.update(format=2, log_prior=[-1.6] * 5, log_likelihood={"killed": [-1.0] * 5})
    with pytest.raises(ValueError, match=r"format 2 \(a naive Bayes artifact of an older release\), expected 3; "
                                         r"regenerate it with python -m retry_bot.classify.train"):
        LearnedModel(old)
    with pytest.raises(ValueError, match="format None"):
        LearnedModel({k: v for k, v in data.items() if k != "format"})


def _objective_gradient(docs, labels, v, k, c, w, b):
    """The gradient of the objective fit_logistic minimises, computed the plain way."""
    import math
    gw = [[x / c for x in w[i]] for i in range(k)]
    gb = [0.0] * k
    for feats, y in zip(docs, labels):
        s = [b[i] + sum(w[i][j] for j in feats) for i in range(k)]
        top = max(s)
        e = [math.exp(x - top) for x in s]
        for i in range(k):
            r = e[i] / sum(e) - (i == y)
            gb[i] += r
            for j in feats:
                gw[i][j] += r
    return [x for row in gw for x in row] + gb


def test_the_fit_reaches_the_regularised_optimum_deterministically():
    # 3 classes, 6 binary features, overlapping documents: the gradient at the fit is ~0
    docs = [[0, 1], [0, 2], [1, 2, 5], [3], [3, 4], [4, 5], [2, 5], [0, 5], [1, 3]]
    labels = [0, 0, 0, 1, 1, 2, 2, 0, 1]
    w, b = fit_logistic(docs, labels, 6, 3, 1.0, 100)
    assert (w, b) == fit_logistic(docs, labels, 6, 3, 1.0, 100)
    assert max(abs(x) for x in _objective_gradient(docs, labels, 6, 3, 1.0, w, b)) < 1e-6
    # a weaker penalty gives larger weights; the biases sum to ~0 only by symmetry, not by constraint
    w10, _ = fit_logistic(docs, labels, 6, 3, 10.0, 100)
    assert sum(abs(x) for row in w10 for x in row) > sum(abs(x) for row in w for x in row)


# ------------------------------------------------------------------ the gate

def _model() -> LearnedModel:
    return LearnedModel(train(CASES, OPTIONS, ("x",)))


UNKNOWN = Classification(category="unclassified", family=Family.UNKNOWN, rule="fallback",
                         evidence=("no rule matched",), confidence="weak")
OOMISH = b"cc1plus killed signal terminated program out of memory java heap\n"
OOMTRACE = TraceText(OOMISH)


def test_the_model_speaks_above_the_threshold_with_its_reasons():
    v = consult(_model(), UNKNOWN, OOMTRACE, failure_reason=None, exit_code=None, structure=NONE, min_probability=0.6)
    assert v.family == Family.OOM and v.rule == "learned:oom" and v.category == "learned_oom"
    assert v.confidence == "weak"
    assert "learned fallback" in v.evidence[0] and "p=" in v.evidence[0]
    # the probability is the posterior of the family it names, carried for the policy's min_probability
    out = _model().predict(_model().features(OOMTRACE, failure_reason=None, exit_code=None, structure=NONE))
    assert v.probability == out.probability == out.posterior["oom"] and 0.6 <= v.probability <= 1
    assert f"p={v.probability:.2f}" in v.evidence[0] and v.to_dict()["probability"] == v.probability
    assert v.evidence[1].startswith("features that weighed most:") and "killed" in v.evidence[1]
    assert "no rule matched" in v.evidence  # the rules' evidence is kept


def test_unknown_stays_unknown_below_the_threshold_or_on_a_thin_trace():
    v = consult(_model(), UNKNOWN, OOMTRACE, failure_reason=None, exit_code=None, structure=NONE, min_probability=1.0)
    assert v.family == Family.UNKNOWN and v.rule == "fallback" and "below min_probability" in v.evidence[-1]
    assert v.probability is None  # the rules' verdict, not the model's
    v = consult(_model(), UNKNOWN, TraceText(b"killed\n"), failure_reason=None, exit_code=None, structure=NONE,
                min_probability=0.5)
    assert v.family == Family.UNKNOWN and "only 1 known words" in v.evidence[-1]


def test_a_record_without_oom_kills_takes_oom_out_of_the_models_choices():
    v = consult(_model(), UNKNOWN, OOMTRACE, failure_reason=None, exit_code=None, structure=NONE,
                min_probability=0.5, allow_oom=False)
    assert v.family != Family.OOM


def test_a_rule_verdict_is_never_overridden(taxonomy):
    # a weak generic rule, an ambiguous failure reason's runner_system_failure, a deliberate unknown
    for trace, reason, rule in [
        (b"make: *** [all] Error 2\n", "script_failure", "build-tool-failed"),
        (b"cc1plus killed out of memory heap\n", "runner_system_failure", "reason-runner-system-failure"),
    ]:
        v, _ = decided(trace, taxonomy, failure_reason=reason, exit_code=None)
        assert v.rule == rule, (v.rule, v.evidence)


def test_the_engine_consults_the_model_only_on_eligible_unknowns(taxonomy):
    trace = (b"Step 3/9 : RUN ./build.sh\nthe frobnicator gave up while linking the widgets of the gadget "
             b"assembly after processing many objects in the build tree\n")
    v = classify(facts(failure_reason="script_failure"), trace, taxonomy)
    assert any("learned fallback" in e for e in v.evidence), v
    off = dataclasses.replace(taxonomy, learned_enabled=False)
    v = classify(facts(failure_reason="script_failure"), trace, off)
    assert v.family == Family.UNKNOWN and not any("learned" in e for e in v.evidence)


def test_the_engine_never_lets_the_model_say_oom_against_the_record(taxonomy):
    trace = OOMISH * 3  # OOM words in an order no rule reads
    v = classify(facts(failure_reason="script_failure", exit_code=1), trace, taxonomy)
    assert v.rule == "learned:oom", v
    # a verified record covering the failing stage counted no OOM kill
    rec = usage_record(oom_kills=0, exit_code=1)
    v = classify(facts(failure_reason="script_failure", exit_code=1), trace, taxonomy, rec)
    assert v.family != Family.OOM, v


def test_taxonomy_learned_table_is_validated():
    base = '[stages.s]\nresolve = "first"\n'
    t = taxonomy_from_text(base + "[learned]\nenabled = false\nmin_probability = 0.75\n", "t.toml")
    assert t.learned_enabled is False and t.learned_min_probability == 0.75
    with pytest.raises(ConfigError) as ei:
        taxonomy_from_text(base + "[learned]\nenabled = 'yes'\nmin_probability = 0.2\nmodel = 'x'\n", "t.toml")
    text = str(ei.value)
    assert "learned.enabled" in text and "must be true or false" in text
    assert "learned.min_probability" in text and "from 0.5 to 1.0" in text
    assert "learned.model" in text and "unknown key" in text


# ------------------------------------------------------------------ the policy's caution

def _learned(family: Family, probability: float | None = 0.7) -> Classification:
    return Classification(category=f"learned_{family.value}", family=family, rule=f"learned:{family.value}",
                          confidence="weak", probability=probability)


def test_the_shipped_policy_retries_learned_infrastructure_once_and_resizes_sure_learned_oom_once():
    """config/policy.toml: the learned infrastructure verdicts met the pre-registered 3:1 bar on blind sets (one
    retry), from p >= 0.8 only (session 28: below it 22 fixed for 11 spoiled on the O-to-ZU replay); the learned
    oom verdicts met the bar set for them (5 fixed, 3:1) only at p >= 0.9 (one resize there, none below)."""
    f = dataclasses.replace(facts(failure_reason="script_failure"), variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    p = default_policy()
    d = decide(f, _learned(Family.OOM, 0.75), [], p, ClassUsage())
    assert d.action == Action.NONE and d.rule == "categories.learned_oom.min_probability", d.reason
    assert "0.75" in d.reason and "0.90" in d.reason, d.reason
    d = decide(f, _learned(Family.OOM, 0.95), [], p, ClassUsage())
    assert d.action == Action.RESIZE and d.budget == 1 and d.rule == "categories.learned_oom", d.reason
    d = decide(f, _learned(Family.INFRASTRUCTURE, 0.85), [], p, ClassUsage())
    assert d.action == Action.RETRY and d.budget == 1 and d.rule == "categories.learned_infrastructure", d.reason
    d = decide(f, _learned(Family.INFRASTRUCTURE, 0.75), [], p, ClassUsage())
    assert d.action == Action.NONE and d.rule == "categories.learned_infrastructure.min_probability", d.reason
    assert "0.75" in d.reason and "0.80" in d.reason, d.reason
    # a rule's verdict of the same family still acts
    rule = Classification(category="dns_error", family=Family.INFRASTRUCTURE, rule="dns-error")
    assert decide(f, rule, [], p, ClassUsage()).action == Action.RETRY


def test_an_admin_can_let_learned_verdicts_act_once():
    p = parse_policy('version = 1\n[categories.learned_infrastructure]\naction = "retry"\nbudget = 1\n')
    f = dataclasses.replace(facts(failure_reason="script_failure"), variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    d = decide(f, _learned(Family.INFRASTRUCTURE), [], p, ClassUsage())
    assert d.action == Action.RETRY and d.budget == 1


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,family", [
    (b"[ RUN      ] MemTest.OomKillerSparesParent\n[  FAILED  ] MemTest.OomKillerSparesParent (3 ms)\n",
     "build_error"),
    (b"    sent SIGKILL to child 4242 on purpose\n--- FAIL: TestSupervisorRestartsKilledChild (0.50s)\n"
     b"FAIL\tsup\t0.61s\n", "build_error"),
    (b"E   requests.exceptions.HTTPError: 500 Server Error: java.lang.OutOfMemoryError: Java heap space\n"
     b"FAILED tests/test_search.py::test_bulk_index - requests.exceptions.HTTPError: 500\n", "build_error"),
    (b"org.apache.hadoop.ipc.RemoteException(java.lang.OutOfMemoryError): Java heap space\n", "build_error"),
])
def test_traps_stay_right_with_the_learned_fallback(taxonomy, trace, family):
    v, action = decided(trace, taxonomy)
    assert v.family.value == family and not v.rule.startswith("learned:"), (v.rule, v.evidence)
    assert action == Action.NONE


# ------------------------------------------------------------------ total on any input

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096), st.sampled_from([None, "script_failure", "unknown_failure"]),
       st.one_of(st.none(), st.integers(-300, 300)))
def test_any_bytes_classify_and_featurise_without_raising(taxonomy, raw, reason, code):
    v = classify(facts(failure_reason=reason, exit_code=code), raw, taxonomy)
    assert isinstance(v.family, Family)
    out = default_model().predict(feats(raw, failure_reason=reason, exit_code=code))
    assert 0.0 <= out.probability <= 1.0 and out.family in default_model().classes


def test_the_classifiers_fast_features_equal_the_training_features_on_every_read_case():
    model = default_model()
    for split in READ_SPLITS:
        for c in load_split(DATA, split):
            raw = c["excerpt"].encode("utf-8")
            kw = {"failure_reason": c.get("failure_reason"), "exit_code": c.get("exit_code"),
                  "structure": analyse(raw)}
            slow = features(TraceText(raw), **kw) & model.vocabulary
            assert model.features(TraceText(raw), **kw) & model.vocabulary == slow, c["id"]


def test_a_damaged_artifact_leaves_unknown_with_a_note_not_a_traceback(taxonomy, monkeypatch):
    import retry_bot.classify.learned as learned

    class Broken:
        def joinpath(self, name):
            return self

        def read_text(self, encoding):
            return '{"format": 3, "classes": ["oom"]'  # cut short

    monkeypatch.setattr(learned, "_DEFAULT", None)
    monkeypatch.setattr(learned.resources, "files", lambda pkg: Broken())
    v = classify(facts(failure_reason="script_failure"), OOMISH * 3, taxonomy)
    assert v.family == Family.UNKNOWN and "learned fallback unavailable" in v.evidence[-1], v
    monkeypatch.setattr(learned, "_DEFAULT", None)


# ------------------------------------------------------------------ the acting trade (benchmarks/eval_learned.py)

def test_eval_learned_counts_fixed_and_spoiled_decisions_per_family():
    import importlib

    ev = importlib.import_module("benchmarks.eval_learned")
    base, acting = ev.Score(), ev.Score()
    base.decisions = {"a": ("oom", False), "b": ("build_error", True), "c": ("infrastructure", False),
                      "d": ("timeout", True), "e": ("oom", True)}
    acting.decisions = {"a": ("oom", True), "b": ("build_error", False), "c": ("infrastructure", False),
                        "d": ("timeout", False), "e": ("oom", True)}
    trade = ev.Trade()
    trade.add(base, acting)
    assert trade.fixed == {"oom": 1}
    assert trade.spoiled == {"build_error": 1, "timeout": 1}
    assert trade.spoiled_deterministic == 2
    # the variants act on exactly the learned categories named; the baseline acts on none
    from retry_bot.policy.model import Action as PAction

    only_oom = ev.acting_policy(oom=True, infrastructure=False)
    assert only_oom.categories["learned_oom"].action == PAction.RESIZE
    assert only_oom.categories["learned_infrastructure"].action == PAction.NONE
    assert only_oom.categories["learned_oom"].min_probability is None  # at any probability the model speaks at
    baseline = ev.acting_policy(False, False)
    assert {baseline.categories[c].action for c in ("learned_oom", "learned_infrastructure")} == {PAction.NONE}
    # the shipped policy: learned infrastructure retried once at p >= 0.8, learned oom resized once at p >= 0.9
    shipped = ev.acting_policy(True, True, oom_min_probability=0.9, infrastructure_min_probability=0.8)
    assert shipped.categories == default_policy().categories


def test_eval_learned_refuses_a_split_not_yet_read():
    import importlib

    ev = importlib.import_module("benchmarks.eval_learned")
    with pytest.raises(SystemExit, match="not a read split"):
        ev.load(UNSEEN[0])
    assert set(ev.TEMPORAL) == {"heldout-d", "heldout-e", "heldout-i", "heldout-j"}
    assert set(ev.LATER) == {f"heldout-{x}" for x in "opqrstuvwxyz"}
    assert all(set(before) <= set(READ_SPLITS) and split not in before for split, (_, before) in
               {**ev.TEMPORAL, **ev.SUPPORTING, **ev.LATER}.items())
    # each of O to Z: a model trained on exactly the splits read before it (O and P were collected together)
    for split, (_, before) in ev.LATER.items():
        last = "heldout-n" if split in ("heldout-o", "heldout-p") else READ_SPLITS[READ_SPLITS.index(split) - 1]
        assert before == READ_SPLITS[:READ_SPLITS.index(last) + 1], split
    assert {commit for commit, _ in ev.LATER.values()} <= ev._TREE_HAS_LEARNED
