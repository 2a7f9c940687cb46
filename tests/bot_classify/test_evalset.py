"""Family accuracy over the labeled set of real job-log excerpts (tests/data/joblogs)."""

from __future__ import annotations

import collections

import pytest
import tomllib
from pathlib import Path

from retry_bot.classify import classify
from retry_bot.model import FAMILIES, JobFacts

CASES = tomllib.loads((Path(__file__).resolve().parents[1] / "data" / "joblogs" / "cases.toml")
                      .read_text("utf-8"))["case"]


def evaluate(taxonomy):
    results = []
    for c in CASES:
        f = JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                     exit_code=c.get("exit_code"), status=c.get("status", "failed"))
        results.append((c, classify(f, c["excerpt"].encode("utf-8"), taxonomy)))
    return results


def test_the_set_is_large_diverse_and_sourced():
    assert len(CASES) >= 50
    assert {c["family"] for c in CASES} == set(FAMILIES)
    assert all(c["source"].startswith("https://") and c["excerpt"].strip() for c in CASES)
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_family_accuracy_at_least_95_percent(taxonomy):
    results = evaluate(taxonomy)
    wrong = [(c["id"], c["family"], r.family.value, r.rule) for c, r in results if r.family.value != c["family"]]
    accuracy = 1 - len(wrong) / len(results)
    confusion = collections.Counter((c["family"], r.family.value) for c, r in results)
    print(f"\nfamily accuracy {accuracy:.1%} over {len(results)} cases; confusions: {wrong}")
    print("confusion matrix (expected, got): count", dict(confusion))
    assert accuracy >= 0.95, wrong


# Issue 11: new excerpts in four splits.  The tuning split was read while writing rules; held-out A,
# B and C were each scored once as held-out sets and then read, so all of them are tuning data now
# (the general pass read every case).  The held-out measurement is a set outside these files.
DATA = Path(__file__).resolve().parents[1] / "data" / "joblogs"
TUNING = tomllib.loads((DATA / "tuning.toml").read_text("utf-8"))["case"]
HELDOUT_A = tomllib.loads((DATA / "heldout-a.toml").read_text("utf-8"))["case"]
HELDOUT = tomllib.loads((DATA / "heldout-b.toml").read_text("utf-8"))["case"]
HELDOUT_C = tomllib.loads((DATA / "heldout-c.toml").read_text("utf-8"))["case"]
HELDOUT_D = tomllib.loads((DATA / "heldout-d.toml").read_text("utf-8"))["case"]
HELDOUT_E = tomllib.loads((DATA / "heldout-e.toml").read_text("utf-8"))["case"]
HELDOUT_F = tomllib.loads((DATA / "heldout-f.toml").read_text("utf-8"))["case"]
HELDOUT_G = tomllib.loads((DATA / "heldout-g.toml").read_text("utf-8"))["case"]
HELDOUT_H = tomllib.loads((DATA / "heldout-h.toml").read_text("utf-8"))["case"]
HELDOUT_I = tomllib.loads((DATA / "heldout-i.toml").read_text("utf-8"))["case"]
HELDOUT_J = tomllib.loads((DATA / "heldout-j.toml").read_text("utf-8"))["case"]
HELDOUT_K = tomllib.loads((DATA / "heldout-k.toml").read_text("utf-8"))["case"]
HELDOUT_L = tomllib.loads((DATA / "heldout-l.toml").read_text("utf-8"))["case"]
#: Scored blind once after the thirteenth pass (83.9 %), then read by the fourteenth: tuning data since (its
#: format and disjointness are checked below, and it has a decision floor like the other read splits)
HELDOUT_M = tomllib.loads((DATA / "heldout-m.toml").read_text("utf-8"))["case"]
#: Scored blind once after the fourteenth pass (77.1 %), then read by the fifteenth: tuning data since (its
#: format and disjointness are checked below, and it has a decision floor like the other read splits)
HELDOUT_N = tomllib.loads((DATA / "heldout-n.toml").read_text("utf-8"))["case"]
#: Collected blind while the fifteenth pass read N, each audited against its sources, scored blind once after the
#: fifteenth pass (O 89.3 %, P 74.7 %), then read by the sixteenth: tuning data since (their format and
#: disjointness are checked below, and they have decision floors like the other read splits)
HELDOUT_O = tomllib.loads((DATA / "heldout-o.toml").read_text("utf-8"))["case"]
HELDOUT_P = tomllib.loads((DATA / "heldout-p.toml").read_text("utf-8"))["case"]
HELDOUT_Q = tomllib.loads((DATA / "heldout-q.toml").read_text("utf-8"))["case"]
#: Collected blind while the seventeenth pass read Q, audited against its sources, scored blind once after the
#: seventeenth pass (88.9 %), then read by the eighteenth: tuning data since (its format and disjointness are
#: checked below, and it has a decision floor like the other read splits)
HELDOUT_R = tomllib.loads((DATA / "heldout-r.toml").read_text("utf-8"))["case"]
#: Collected blind while the eighteenth pass read R, audited against its sources, scored blind once after the
#: eighteenth pass and the runner catalogue (87.6 %), then read by the nineteenth: tuning data since (its format and
#: disjointness are checked below, and it has a decision floor like the other read splits)
HELDOUT_S = tomllib.loads((DATA / "heldout-s.toml").read_text("utf-8"))["case"]
#: Collected blind while the nineteenth pass read S, audited against its sources, scored blind once after the
#: nineteenth pass and the GitHub Actions catalogue (77.9 %), then read by the twentieth: tuning data since (its format
#: and disjointness are checked below, and it has a decision floor like the other read splits)
HELDOUT_T = tomllib.loads((DATA / "heldout-t.toml").read_text("utf-8"))["case"]
#: Collected blind while the twentieth pass read T, audited against its sources, scored blind once after the
#: twentieth pass (82.1 %), then read by the twenty-first: tuning data since (its format and disjointness are
#: checked below, and it has a decision floor like the other read splits)
HELDOUT_U = tomllib.loads((DATA / "heldout-u.toml").read_text("utf-8"))["case"]
#: Collected blind while the twenty-first pass read U, audited against its sources, scored blind once after the
#: twenty-first pass (83.1 %), then read by the twenty-second: tuning data since (its format and disjointness are
#: checked below, and it has a decision floor like the other read splits)
HELDOUT_V = tomllib.loads((DATA / "heldout-v.toml").read_text("utf-8"))["case"]
#: Collected blind right after V, the same way, audited against its sources, scored blind once after the
#: twenty-second pass (91.4 %), then read by the twenty-third: tuning data since (it has a decision floor below)
HELDOUT_W = tomllib.loads((DATA / "heldout-w.toml").read_text("utf-8"))["case"]
#: Collected blind after W, the same way, audited against its sources, scored blind once after the twenty-third
#: pass (87.0 %), then read by the twenty-fourth: tuning data since (it has a decision floor below)
HELDOUT_X = tomllib.loads((DATA / "heldout-x.toml").read_text("utf-8"))["case"]
#: Collected blind after X, the same way, audited against its sources, scored blind once after the twenty-fourth
#: pass (78.7 %) and then read by the twenty-fifth: tuning data since
HELDOUT_Y = tomllib.loads((DATA / "heldout-y.toml").read_text("utf-8"))["case"]
#: Collected blind after Y, the same way, audited against its sources, scored blind once after the twenty-fifth
#: pass (87.5 %) and then read by the twenty-sixth: tuning data since (it has a decision floor below)
HELDOUT_Z = tomllib.loads((DATA / "heldout-z.toml").read_text("utf-8"))["case"]
#: Collected blind while the twenty-sixth pass read Z, audited against its sources (36 kept, 2 removed), scored blind
#: once after the twenty-sixth pass (83.3 %) and then read by the twenty-seventh: tuning data since (it has a
#: decision floor below)
HELDOUT_ZA = tomllib.loads((DATA / "heldout-za.toml").read_text("utf-8"))["case"]
#: Collected blind after ZA while the twenty-seventh pass read ZA, audited against its sources (67 kept), scored blind
#: once after the twenty-seventh pass (88.1 %) and then read by the twenty-eighth: tuning data since (it has a
#: decision floor below)
HELDOUT_ZB = tomllib.loads((DATA / "heldout-zb.toml").read_text("utf-8"))["case"]
#: Collected blind after ZB while the twenty-seventh pass read ZA, audited against its sources (58 kept, 4 removed),
#: scored blind once after the twenty-eighth pass (86.2 %) and then read by the twenty-ninth: tuning data since (it
#: has a decision floor below)
HELDOUT_ZC = tomllib.loads((DATA / "heldout-zc.toml").read_text("utf-8"))["case"]
#: Collected blind after ZC while the twenty-eighth pass read ZB, audited against its sources, scored blind once after
#: the twenty-ninth pass (80.9 %) and then read by the thirtieth: tuning data since (it has a decision floor below)
HELDOUT_ZD = tomllib.loads((DATA / "heldout-zd.toml").read_text("utf-8"))["case"]
#: Collected blind after ZD while the twenty-ninth pass read ZC, audited against its sources, scored blind once after
#: the thirtieth pass (93.4 %) and then read by the thirty-first: tuning data since (it has a decision floor below)
HELDOUT_ZE = tomllib.loads((DATA / "heldout-ze.toml").read_text("utf-8"))["case"]
#: Collected blind after ZE while the thirty-first pass read ZE, audited against its sources (46 kept, 1 removed),
#: scored blind once after the thirty-first pass (89.1 %) and then read by the thirty-second: tuning data since (it has
#: a decision floor below)
HELDOUT_ZF = tomllib.loads((DATA / "heldout-zf.toml").read_text("utf-8"))["case"]
#: Collected blind after ZF while the thirty-second pass was written, audited against its sources (59 kept), scored
#: blind once after the thirty-second pass (86.4 %) and then read by the thirty-third: tuning data since (it has a
#: decision floor below)
HELDOUT_ZG = tomllib.loads((DATA / "heldout-zg.toml").read_text("utf-8"))["case"]
#: Held-out ZH and ZI: collected blind after ZG while the thirty-second and thirty-third passes were written, audited
#: against their sources (50 and 43 kept), scored blind once by the lead after the thirty-third pass (94.0 %, 97.7 %)
#: and then read by the thirty-fourth: tuning data since (they have decision floors below)
HELDOUT_ZH = tomllib.loads((DATA / "heldout-zh.toml").read_text("utf-8"))["case"]
HELDOUT_ZI = tomllib.loads((DATA / "heldout-zi.toml").read_text("utf-8"))["case"]
#: Held-out ZJ and ZK: collected blind after ZI at the same time by two collectors (GitHub threads; web pages), audited
#: against their sources (45 and 13 kept), scored blind once by the lead after the thirty-fourth pass (88.9 %, 53.8 %)
#: and then read by the thirty-fifth: tuning data since (they have decision floors below)
HELDOUT_ZJ = tomllib.loads((DATA / "heldout-zj.toml").read_text("utf-8"))["case"]
HELDOUT_ZK = tomllib.loads((DATA / "heldout-zk.toml").read_text("utf-8"))["case"]
#: Held-out ZL: collected blind after ZJ and ZK while the thirty-fifth pass was written, audited against its sources
#: (44 kept), scored blind once by the lead after the thirty-fifth pass (90.9 %) and then read by the thirty-sixth:
#: tuning data since (it has a decision floor below)
HELDOUT_ZL = tomllib.loads((DATA / "heldout-zl.toml").read_text("utf-8"))["case"]
#: Held-out ZM: collected blind after ZL while the thirty-fifth pass was written, audited against its sources (45
#: kept), scored blind once by the lead after the thirty-sixth pass (84.4 %) and then read by the thirty-seventh:
#: tuning data since (it has a decision floor below)
HELDOUT_ZM = tomllib.loads((DATA / "heldout-zm.toml").read_text("utf-8"))["case"]
#: Held-out ZN: collected blind after ZM while the thirty-fifth pass was written, audited against its sources (45
#: kept), scored blind once by the lead after the thirty-seventh pass (84.4 %) and then read by the thirty-eighth:
#: tuning data since (it has a decision floor below)
HELDOUT_ZN = tomllib.loads((DATA / "heldout-zn.toml").read_text("utf-8"))["case"]
#: Held-out ZO: collected blind after ZN while the thirty-seventh pass was written, audited against its sources (35
#: kept), scored blind once by the lead after the thirty-seventh pass (91.4 %) and then read by the thirty-eighth:
#: tuning data since (it has a decision floor below)
HELDOUT_ZO = tomllib.loads((DATA / "heldout-zo.toml").read_text("utf-8"))["case"]
#: Held-out ZP: collected blind after splits A to ZO had been read by the thirty-eighth pass, audited against its
#: sources (49 kept), scored blind once by the lead after the thirty-eighth pass (77.6 %) and then read by the
#: thirty-ninth: tuning data since (it has a decision floor below)
HELDOUT_ZP = tomllib.loads((DATA / "heldout-zp.toml").read_text("utf-8"))["case"]
#: Held-out ZQ: collected blind at the same time as ZP, audited against its sources (37 kept), scored blind once by
#: the lead after the thirty-eighth pass (83.8 %) and then read by the thirty-ninth: tuning data since (it has a
#: decision floor below)
HELDOUT_ZQ = tomllib.loads((DATA / "heldout-zq.toml").read_text("utf-8"))["case"]
#: Held-out ZR: collected blind after ZP and ZQ while the thirty-ninth pass was written, audited against its
#: sources (52 kept), scored blind once by the lead after the thirty-ninth pass (82.7 %) and then read by the
#: fortieth: tuning data since (it has a decision floor below)
HELDOUT_ZR = tomllib.loads((DATA / "heldout-zr.toml").read_text("utf-8"))["case"]
#: Held-out ZS: collected blind after ZR, while the thirty-ninth and fortieth passes were written, audited
#: against its sources (50 kept), scored blind once by the lead after the fortieth pass (82.0 %) and then read by
#: the forty-first: tuning data since (it has a decision floor below)
HELDOUT_ZS = tomllib.loads((DATA / "heldout-zs.toml").read_text("utf-8"))["case"]
#: Held-out ZT: collected blind after ZS, while the thirty-ninth and fortieth passes were written, audited
#: against its sources (48 kept), scored blind once by the lead after the fortieth pass (89.6 %) and then read by
#: the forty-first: tuning data since (it has a decision floor below)
HELDOUT_ZT = tomllib.loads((DATA / "heldout-zt.toml").read_text("utf-8"))["case"]
#: Held-out ZU: collected blind after ZT while the forty-first pass was written, audited against its
#: sources (45 kept), scored blind once by the lead after the forty-first pass (82.2 %) and then read by the
#: forty-second: tuning data since (it has a decision floor below)
HELDOUT_ZU = tomllib.loads((DATA / "heldout-zu.toml").read_text("utf-8"))["case"]
#: Held-out ZV: collected blind after ZU (after the forty-second pass) by a collector who read no rule, audited against its
#: sources (33 kept), scored blind once by the lead after the forty-second pass (78.8 %) and then read by the
#: forty-third: tuning data since (it has a decision floor below)
HELDOUT_ZV = tomllib.loads((DATA / "heldout-zv.toml").read_text("utf-8"))["case"]
#: Held-out ZW: collected blind after ZU (after the forty-second pass, beside ZV) by a collector who read no rule,
#: audited against its sources (32 kept), scored blind once by the lead after the forty-second pass (78.1 %) and then
#: read by the forty-third: tuning data since (it has a decision floor below)
HELDOUT_ZW = tomllib.loads((DATA / "heldout-zw.toml").read_text("utf-8"))["case"]
#: Held-out ZX: collected blind after ZU (after the forty-second pass, beside ZV and ZW) by a collector who read no
#: rule, audited against its sources (33 kept), scored blind once by the lead after the forty-second pass (78.8 %) and
#: then read by the forty-third: tuning data since (it has a decision floor below)
HELDOUT_ZX = tomllib.loads((DATA / "heldout-zx.toml").read_text("utf-8"))["case"]
#: Held-out ZY: collected blind after ZX, while the forty-third pass was written, by a collector who read no rule,
#: audited against its sources (43 kept), scored blind once by the lead after the forty-third pass (88.4 %) and then
#: read by the forty-fourth: tuning data since (it has a decision floor below)
HELDOUT_ZY = tomllib.loads((DATA / "heldout-zy.toml").read_text("utf-8"))["case"]
#: Held-out ZZ: collected blind beside ZY, while the forty-third pass was written, by a collector who read no rule,
#: audited against its sources (49 kept), scored blind once by the lead after the forty-third pass (85.7 %) and then
#: read by the forty-fourth: tuning data since (it has a decision floor below)
HELDOUT_ZZ = tomllib.loads((DATA / "heldout-zz.toml").read_text("utf-8"))["case"]
#: Held-out ZZB: collected blind after ZZ, while the forty-fourth pass was written, by a collector who read no rule,
#: audited against its sources (29 kept), scored blind once by the lead after the forty-fourth pass (86.2 %) and then
#: read by the forty-fifth: tuning data since (it has a decision floor below)
HELDOUT_ZZB = tomllib.loads((DATA / "heldout-zzb.toml").read_text("utf-8"))["case"]
#: Held-out ZZA: collected blind beside ZZB, while the forty-fourth pass was written, by a collector who read no rule,
#: audited against its sources (32 kept), scored blind once by the lead after the forty-fourth pass (90.6 %) and then
#: read by the forty-fifth: tuning data since (it has a decision floor below)
HELDOUT_ZZA = tomllib.loads((DATA / "heldout-zza.toml").read_text("utf-8"))["case"]
#: Held-out ZZC: collected blind after ZZB (once the forty-fifth pass was written) by a collector who read no rule,
#: audited against its sources (43 kept), scored blind once by the lead after the forty-fifth pass (95.3 %) and then
#: read by the forty-sixth: tuning data since (it has a decision floor below)
HELDOUT_ZZC = tomllib.loads((DATA / "heldout-zzc.toml").read_text("utf-8"))["case"]
#: Held-out ZZD: collected blind beside ZZC (once the forty-fifth pass was written) by a collector who read no rule,
#: audited against its sources (42 kept), scored blind once by the lead after the forty-fifth pass (88.1 %) and then
#: read by the forty-sixth: tuning data since (it has a decision floor below)
HELDOUT_ZZD = tomllib.loads((DATA / "heldout-zzd.toml").read_text("utf-8"))["case"]
#: Held-out ZZE: collected blind after ZZB and beside ZZC and ZZD (before the forty-sixth pass was written) by a
#: collector who read no rule, audited against its sources (38 kept), scored blind once by the lead after the
#: forty-sixth pass (84.2 %) and then read by the forty-seventh: tuning data since (it has a decision floor below)
HELDOUT_ZZE = tomllib.loads((DATA / "heldout-zze.toml").read_text("utf-8"))["case"]
#: Held-out ZZF: collected blind beside ZZE (before the forty-sixth pass was written) by a collector who read no rule,
#: audited against its sources (38 kept), scored blind once by the lead after the forty-sixth pass (84.2 %) and then
#: read by the forty-seventh: tuning data since (it has a decision floor below)
HELDOUT_ZZF = tomllib.loads((DATA / "heldout-zzf.toml").read_text("utf-8"))["case"]
#: Held-out ZZG: collected blind after ZZF (while the forty-seventh pass was written) by a collector who read no rule,
#: audited against its sources (31 kept), scored blind once by the lead after the forty-seventh pass (90.3 %) and then
#: read by the forty-eighth: tuning data since (it has a decision floor below)
HELDOUT_ZZG = tomllib.loads((DATA / "heldout-zzg.toml").read_text("utf-8"))["case"]
#: Held-out ZZH: collected blind beside ZZG (while the forty-seventh pass was written) by a collector who read no rule,
#: audited against its sources (43 kept), scored blind once by the lead after the forty-seventh pass (79.1 %) and then
#: read by the forty-eighth: tuning data since (it has a decision floor below)
HELDOUT_ZZH = tomllib.loads((DATA / "heldout-zzh.toml").read_text("utf-8"))["case"]
#: Held-out ZZI: collected blind after ZZH (while the forty-eighth pass was written) by a collector who read no rule,
#: audited against its sources (39 kept), scored blind once by the lead after the forty-eighth pass (92.3 %) and then
#: read by the forty-ninth: tuning data since (it has a decision floor below)
HELDOUT_ZZI = tomllib.loads((DATA / "heldout-zzi.toml").read_text("utf-8"))["case"]
#: Held-out ZZJ: collected blind beside ZZI (while the forty-eighth pass was written) by a collector who read no rule,
#: audited against its sources (36 kept), scored blind once by the lead after the forty-eighth pass (94.4 %) and then
#: read by the forty-ninth: tuning data since (it has a decision floor below)
HELDOUT_ZZJ = tomllib.loads((DATA / "heldout-zzj.toml").read_text("utf-8"))["case"]


def test_new_splits_are_sourced_disjoint_and_large_enough():
    ids = [c["id"] for c in CASES + TUNING + HELDOUT_A + HELDOUT + HELDOUT_C]
    assert len(ids) == len(set(ids))
    assert len(HELDOUT_A) >= 60 and len(HELDOUT) >= 60 and len(HELDOUT_C) >= 40
    for c in TUNING + HELDOUT_A + HELDOUT + HELDOUT_C:
        assert c["source"].startswith("https://") and c["excerpt"].strip(), c["id"]
        assert c["family"] in FAMILIES, c["id"]
    # held-out B reuses no excerpt of the other splits
    seen = {" ".join(c["excerpt"].split()) for c in CASES + TUNING + HELDOUT_A}
    assert not [c["id"] for c in HELDOUT if " ".join(c["excerpt"].split()) in seen]
    seen |= {" ".join(c["excerpt"].split()) for c in HELDOUT}
    assert not [c["id"] for c in HELDOUT_C if " ".join(c["excerpt"].split()) in seen]
    assert not {c["source"] for c in HELDOUT_A + HELDOUT} & {c["source"] for c in CASES}
    assert not {c["source"] for c in HELDOUT} & {c["source"] for c in TUNING + HELDOUT_A}
    assert not {c["source"] for c in HELDOUT_C} & {c["source"] for c in CASES + TUNING + HELDOUT_A + HELDOUT}
    # D, E, F and G (each collected blind, after the splits before it were read) reuse no thread or
    # excerpt
    earlier = CASES + TUNING + HELDOUT_A + HELDOUT + HELDOUT_C
    for later in (HELDOUT_D, HELDOUT_E, HELDOUT_F, HELDOUT_G):
        assert len(later) >= 90
        for c in later:
            assert c["source"].startswith("https://") and c["excerpt"].strip(), c["id"]
            assert c["family"] in FAMILIES, c["id"]
        assert not {c["id"] for c in later} & {c["id"] for c in earlier}
        assert not {" ".join(c["excerpt"].split()) for c in later} & {" ".join(c["excerpt"].split()) for c in earlier}
        assert not {c["source"] for c in later} & {c["source"] for c in earlier}
        earlier = earlier + later
    # H (GitLab CI job logs only, collected blind while F and G stayed sealed) is small: the public
    # GitLab-log threads the earlier splits had not taken were few
    assert len(HELDOUT_H) >= 18
    for c in HELDOUT_H:
        assert c["id"].startswith("h-") and c["source"].startswith("https://") and c["excerpt"].strip(), c["id"]
        assert c["family"] in FAMILIES, c["id"]
    assert len({c["id"] for c in HELDOUT_H}) == len(HELDOUT_H)
    assert not {c["id"] for c in HELDOUT_H} & {c["id"] for c in earlier}
    assert not {" ".join(c["excerpt"].split()) for c in HELDOUT_H} & {" ".join(c["excerpt"].split()) for c in earlier}
    assert not {c["source"] for c in HELDOUT_H} & {c["source"] for c in earlier}
    # I (collected blind while F, G and H stayed sealed, without reading any case of them) reuses no
    # thread, excerpt or id of any earlier split, H included
    earlier = earlier + HELDOUT_H
    # I to N were each collected blind while the pass before them was written, without reading
    # any case of the other splits: each reuses no thread, excerpt or id of any earlier split
    for prefix, split, least in (("i-", HELDOUT_I, 80), ("j-", HELDOUT_J, 60), ("k-", HELDOUT_K, 50),
                                 ("l-", HELDOUT_L, 60), ("m-", HELDOUT_M, 60),
                                 ("n-", HELDOUT_N, 60), ("o-", HELDOUT_O, 60), ("p-", HELDOUT_P, 60),
                                 ("q-", HELDOUT_Q, 60), ("r-", HELDOUT_R, 60),
                                 ("s-", HELDOUT_S, 60), ("t-", HELDOUT_T, 60),
                                 ("u-", HELDOUT_U, 50), ("v-", HELDOUT_V, 50),
                                 ("w-", HELDOUT_W, 50), ("x-", HELDOUT_X, 50),
                                 ("y-", HELDOUT_Y, 50), ("z-", HELDOUT_Z, 40),
                                 ("za-", HELDOUT_ZA, 35), ("zb-", HELDOUT_ZB, 60),
                                 ("zc-", HELDOUT_ZC, 50),
                                 ("zd-", HELDOUT_ZD, 60),
                                 ("ze-", HELDOUT_ZE, 55),
                                 ("zf-", HELDOUT_ZF, 40),
                                 ("zg-", HELDOUT_ZG, 50),
                                 ("zh-", HELDOUT_ZH, 45),
                                 ("zi-", HELDOUT_ZI, 40),
                                 ("zj-", HELDOUT_ZJ, 40),
                                 ("zk-", HELDOUT_ZK, 12),
                                 ("zl-", HELDOUT_ZL, 40),
                                 ("zm-", HELDOUT_ZM, 40),
                                 ("zn-", HELDOUT_ZN, 40),
                                 ("zo-", HELDOUT_ZO, 30),
                                 ("zp-", HELDOUT_ZP, 44),
                                 ("zq-", HELDOUT_ZQ, 33),
                                 ("zr-", HELDOUT_ZR, 47),
                                 ("zs-", HELDOUT_ZS, 45),
                                 ("zt-", HELDOUT_ZT, 43),
                                 ("zu-", HELDOUT_ZU, 40),
                                 ("zv-", HELDOUT_ZV, 30),
                                 ("zw-", HELDOUT_ZW, 29),
                                 ("zx-", HELDOUT_ZX, 30),
                                 ("zy-", HELDOUT_ZY, 40),
                                 ("zz-", HELDOUT_ZZ, 45),
                                 ("zzb-", HELDOUT_ZZB, 26),
                                 ("zza-", HELDOUT_ZZA, 29),
                                 ("zzc-", HELDOUT_ZZC, 40),
                                 ("zzd-", HELDOUT_ZZD, 39),
                                 ("zze-", HELDOUT_ZZE, 35),
                                 ("zzf-", HELDOUT_ZZF, 35),
                                 ("zzg-", HELDOUT_ZZG, 28),
                                 ("zzh-", HELDOUT_ZZH, 40),
                                 ("zzi-", HELDOUT_ZZI, 36),
                                 ("zzj-", HELDOUT_ZZJ, 33)):
        # Counts only in the messages: a sealed split's text, sources and ids must not reach whoever runs the
        # test (pytest would print the operands of a failed comparison).
        n = len(split)
        assert n >= least, prefix
        malformed = sum(not (c["id"].startswith(prefix) and c["source"].startswith("https://") and c["excerpt"].strip()
                             and c["family"] in FAMILIES) for c in split)
        assert malformed == 0, f"{prefix}: {malformed} case(s) without id prefix, https source, excerpt or known family"
        ids, sources = len({c["id"] for c in split}), len({c["source"] for c in split})
        assert ids == n, f"{prefix}: {n - ids} repeated id(s)"
        assert sources == n, f"{prefix}: {n - sources} repeated source thread(s)"
        earlier_ids, earlier_sources = {c["id"] for c in earlier}, {c["source"] for c in earlier}
        seen = {" ".join(c["excerpt"].split()) for c in earlier}
        reused = (sum(c["id"] in earlier_ids for c in split), sum(c["source"] in earlier_sources for c in split),
                  sum(" ".join(c["excerpt"].split()) in seen for c in split))
        assert reused == (0, 0, 0), f"{prefix}: ids, sources, excerpts of earlier splits reused: {reused}"
        earlier = earlier + split

def test_tuning_split_family_accuracy(taxonomy):
    wrong = []
    for c in TUNING:
        f = JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                     exit_code=c.get("exit_code"), status=c.get("status", "failed"))
        r = classify(f, c["excerpt"].encode("utf-8"), taxonomy)
        if r.family.value != c["family"]:
            wrong.append((c["id"], c["family"], r.family.value, r.rule))
    assert 1 - len(wrong) / len(TUNING) >= 0.90, wrong


def test_score_script_runs_on_every_split(capsys):
    import runpy
    import sys
    argv = sys.argv
    try:
        sys.argv = ["score_classify.py"]
        with pytest.raises(SystemExit) as exc:
            runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "score_classify.py"),
                           run_name="__main__")
    finally:
        sys.argv = argv
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for split in ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c", "heldout-d", "heldout-e", "heldout-f",
                  "heldout-g", "heldout-h", "heldout-i", "heldout-j", "heldout-k", "heldout-l", "heldout-m",
                  "heldout-n", "heldout-o", "heldout-p", "heldout-q", "heldout-r", "heldout-s", "heldout-t", "heldout-u",
                  "heldout-v", "heldout-w", "heldout-x",
                  "heldout-y", "heldout-z", "heldout-za", "heldout-zb", "heldout-zc", "heldout-zd", "heldout-ze", "heldout-zf",
                  "heldout-zg", "heldout-zh", "heldout-zi", "heldout-zj", "heldout-zk", "heldout-zl",
                  "heldout-zm", "heldout-zn", "heldout-zo", "heldout-zp", "heldout-zq", "heldout-zr", "heldout-zs",
                  "heldout-zt", "heldout-zu", "heldout-zv", "heldout-zw", "heldout-zx", "heldout-zy", "heldout-zz",
                  "heldout-zzb", "heldout-zza", "heldout-zzc", "heldout-zzd", "heldout-zze", "heldout-zzf", "heldout-zzg", "heldout-zzh", "heldout-zzi", "heldout-zzj"):
        assert out.count(split) >= 1 and "right" in out
    # a sealed split is named but not scored by a run over every split (it is scored once, by naming it)
    sealed = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "score_classify.py"))["SEALED"]
    for line in out.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name in sealed:
            assert "sealed: not scored here" in line and "right" not in line


#: Right-decision floors per split (all tuning data now): a later rule must not quietly give back
#: what the general pass reached (docs/taxonomy.md, "Evaluation set", has the measured figures).
#: Held-out D became tuning data after it was scored once at 5c6641f (83.5 %); the fourth pass
#: reached 97/97 on it; its floor leaves room to trade one case. Held-out E was scored once before
#: it was read (84.9 % after the fourth pass); the fifth pass's general mechanisms reached 92/93, and
#: its floor is one case less (91/93). F and G were scored blind once after the sixth pass (81.3 %,
#: 85.0 %) and read by the seventh, which reached 89/91 and 90/100: their floors are one case less
#: (88/91, 89/100). H (18, skewed, 1 deterministic re-run in 18) has no floor: one case is 5.6 points.
#: I was scored blind once after the seventh pass (79.0 %) and read by the eighth, which reached
#: 96/105: its floor is one case less (95/105). J was scored blind once after the eighth pass (85.4 %)
#: and read by the ninth, which reached 88/89: its floor is one case less (87/89). K was scored blind
#: after the eighth to eleventh passes (81.9 % each time) and read by the twelfth, which reached 70/72:
#: its floor is one case less (69/72). L was scored blind once after the twelfth pass (84.1 %) and read by the
#: thirteenth, which reached 86/88: its floor is one case less (85/88). M was scored blind once after the
#: thirteenth pass (83.9 %) and read by the fourteenth, which reached 87/93: its floor is one case less (86/93).
#: N was scored blind once after the fourteenth pass (77.1 %) and read by the fifteenth, which reached 71/83: its
#: floor is one case less (70/83). O and P were scored blind once after the fifteenth pass (89.3 %, 74.7 %) and read
#: by the sixteenth, which reached 72/75 and 73/79: their floors are one case less (71/75, 72/79). Q was scored
#: blind once after the sixteenth pass (84.5 %) and read by the seventeenth, which reached 78/84: its floor is one
#: case less (77/84) R was scored blind once after the seventeenth pass (88.9 %) and read by the eighteenth, which
#: reached 69/72: its floor is one case less (68/72). S was scored blind once after the eighteenth pass and the
#: runner catalogue (87.6 %) and read by the nineteenth, which reached 84/89: its floor is one case less (83/89).
#: T was scored blind once after the nineteenth pass and the GitHub Actions catalogue (77.9 %) and read by the
#: twentieth, which reached 60/68: its floor is one case less (59/68). U was scored blind once after the twentieth
#: pass (82.1 %) and read by the twenty-first, which reached 51/56: its floor is one case less (50/56).
#: V was scored blind once after the twenty-first pass (83.1 %) and read by the twenty-second, which reached 51/59: its
#: floor is one case less (50/59). W was scored blind once after the twenty-second pass (91.4 %) and read by the
#: twenty-third, which reached 69/70 (in-sample, its cases also train the learned fallback since): its floor is one
#: case less (68/70). X was scored blind once after the twenty-third pass (87.0 %) and read by the twenty-fourth,
#: which reached 64/69 (in-sample, its cases also train the learned fallback since): its floor is one case less
#: (63/69). Z was scored blind once after the twenty-fifth pass (87.5 %) and read by the twenty-sixth, which reached
#: 50/56 (in-sample, its cases also train the learned fallback since): its floor is one case less (49/56).
#: ZA was scored blind once after the twenty-sixth pass (83.3 %) and read by the twenty-seventh, which reached 34/36
#: (in-sample, its cases also train the learned fallback since): its floor is one case less (33/36).
#: ZB was scored blind once after the twenty-seventh pass (88.1 %) and read by the twenty-eighth, which reached 63/67
#: (in-sample, its cases also train the learned fallback since): its floor is one case less (62/67).
#: ZC was scored blind once after the twenty-eighth pass (86.2 %) and read by the twenty-ninth, which reached 54/58
#: (in-sample, its cases also train the learned fallback since): its floor is one case less (53/58).
#: ZD was scored blind once after the twenty-ninth pass (80.9 %) and read by the thirtieth, which reached 64/68
#: (in-sample, its cases also train the learned fallback since): its floor is one case less (63/68).
#: ZE was scored blind once after the thirtieth pass (93.4 %) and read by the thirty-first, which reached 60/61
#: (in-sample, its cases also train the learned fallback since): its floor is one case less (59/61).
#: ZF was scored blind once after the thirty-first pass (89.1 %, 2 wasted re-runs) and read by the thirty-second, which
#: reached 44/46 with no wasted re-run (in-sample, its cases also train the learned fallback since): its floor is one
#: case less (43/46), and it needs no cap entry.
#: ZG was scored blind once after the thirty-second pass (86.4 %, 1 wasted re-run) and read by the thirty-third, which
#: reached 56/59 with no wasted re-run (in-sample, its cases also train the learned fallback since): its floor is one
#: case less (55/59), and it needs no cap entry.
#: ZH and ZI were scored blind once after the thirty-third pass (94.0 %, 1 wasted re-run; 97.7 %) and read by the
#: thirty-fourth, which reached 50/50 and 42/43 with no wasted re-run (in-sample, their cases also train the learned
#: fallback since): their floors are one case less (49/50, 41/43), and they need no cap entry.
#: ZJ and ZK were scored blind once after the thirty-fourth pass (88.9 %, 1 wasted re-run; 53.8 %) and read by the
#: thirty-fifth, which reached 42/45 and 11/13 (in-sample, their cases also train the learned fallback since): their
#: floors are one case less (41/45, 10/13). ZJ keeps its one wasted re-run (a documented miss of the thirty-fifth pass:
#: a Jenkins build that hung, whose durable-task lines are an agent lost in heldout-k and heldout-r), so its cap entry
#: holds it at 1 of 45; ZK has none and needs no cap entry.
#: ZL was scored blind once after the thirty-fifth pass (90.9 %, 2 wasted re-runs) and read by the thirty-sixth, which
#: reached 42/44 (in-sample, its cases also train the learned fallback since): its floor is one case less (41/44). It
#: keeps one wasted re-run (a documented miss of the thirty-sixth pass: a PostgreSQL recovery test that kills a backend
#: on purpose, whose postmaster line 'terminated by signal 9: Killed' is the OOM killer's in most jobs), so its cap
#: entry holds it at 1 of 44.
#: ZM was scored blind once after the thirty-sixth pass (84.4 %, 2 wasted re-runs) and read by the thirty-seventh,
#: which reached 44/45 with no wasted re-run (in-sample, its cases also train the learned fallback since): its floor is
#: one case less (43/45), and it needs no cap entry.
#: ZN and ZO were scored blind once after the thirty-seventh pass (84.4 % with 1 wasted re-run, 91.4 % with none) and
#: read by the thirty-eighth, which reached 43/45 and 34/35 with no wasted re-run (in-sample, their cases also train
#: the learned fallback since): their floors are one case less (42/45, 33/35), and they need no cap entry.
#: ZP and ZQ were scored blind once after the thirty-eighth pass (77.6 % with 6 wasted re-runs, 83.8 % with 2) and
#: read by the thirty-ninth, which reached 44/49 and 34/37 (in-sample, their cases also train the learned fallback
#: since): their floors are one case less (43/49, 33/37). Each keeps 2 wasted re-runs, documented misses of the
#: thirty-ninth pass (docs/taxonomy.md, "Thirty-ninth pass"): ZP a conda checksum mismatch from a channel's wrong md5
#: (the same text is a mirror's transient state in heldout-e) and a GitLab 'No such image' (labelled infrastructure
#: in heldout-d, -i and -u, configuration in heldout-zc); ZQ a git:// connection timed out behind a firewall (the
#: same git line is a transient failure in heldout-f and -q) and a Go 'cannot allocate' of one absurd block on Plan 9.
#: Their cap entries hold them at 2 of 49 and 2 of 37; none may be added.
#: ZR was scored blind once after the thirty-ninth pass (82.7 % with 3 wasted re-runs) and read by the fortieth, which
#: reached 50/52 (in-sample, its cases also train the learned fallback since): its floor is one case less (49/52). It
#: keeps one wasted re-run, a documented miss of the fortieth pass (docs/taxonomy.md, "Fortieth pass"): a Terraform
#: provider whose Go runtime printed 'fatal error: out of memory' while its debug logger formatted a huge payload (a
#: bug, but the same runtime line is a real OOM in most jobs), so its cap entry holds it at 1 of 52; none may be added.
#: ZS and ZT were scored blind once after the fortieth pass (82.0 % with 5 wasted re-runs, 89.6 % with 1) and read by
#: the forty-first, which reached 46/50 and 46/48 (in-sample, their cases also train the learned fallback since):
#: their floors are one case less (45/50, 45/48). ZT keeps no wasted re-run. ZS keeps 2, documented misses of the
#: forty-first pass (docs/taxonomy.md, "Forty-first pass"): a Go 'fatal error: out of memory' and a Java
#: 'OutOfMemoryError' that were a 32-bit toolchain's or JDK's address-space limit, not the machine's memory (the same
#: runtime lines are real OOM kills in most jobs), so its cap entry holds it at 2 of 50; none may be added.
#: ZU was scored blind once after the forty-first pass (82.2 % with 2 wasted re-runs) and read by the forty-second,
#: which reached 42/45 (in-sample, its cases also train the learned fallback since): its floor is one case less
#: (41/45). It keeps no wasted re-run.
#: ZV, ZW and ZX were scored blind once after the forty-second pass (78.8 % with 2 wasted re-runs, 78.1 % with 5,
#: 78.8 % with none) and read by the forty-third, which reached 29/33, 30/32 and 32/33 (in-sample, their cases also
#: train the learned fallback since): their floors are one case less (28/33, 29/32, 31/33). ZW and ZX keep no wasted
#: re-run. ZV keeps 1, a documented miss of the forty-third pass (docs/taxonomy.md, "Forty-third pass"): a rustc UI
#: test whose deliberate allocation failure was SIGKILLed on one platform (label only ambiguous; a bare 'signal: 9
#: (SIGKILL)' is an OOM kill in most jobs), so its cap entry holds it at 1 of 33; none may be added.
#: ZY and ZZ were scored blind once after the forty-third pass (88.4 % with 1 wasted re-run, 85.7 % with 2) and read by
#: the forty-fourth, which reached 42/43 and 48/49 (in-sample, their cases also train the learned fallback since):
#: their floors are one case less (41/43, 47/49). Neither keeps a wasted re-run.
#: ZZA and ZZB were scored blind once after the forty-fourth pass (90.6 % with no wasted re-run, 86.2 % with 2) and read
#: by the forty-fifth, which reached 30/32 and 28/29 (in-sample, their cases also train the learned fallback since):
#: their floors are one case less (29/32, 27/29). ZZB keeps 1 wasted re-run, a documented miss of the forty-fifth pass
#: (docs/taxonomy.md, "Forty-fifth pass"): a macOS 'Killed: 9' (SIGKILL, exit 137) of a freshly built tool on one
#: runner image, labelled configuration by its thread (a bare SIGKILL is an OOM kill in most jobs), so its cap entry
#: holds it at 1 of 29; none may be added.
#: ZZC and ZZD were scored blind once after the forty-fifth pass (95.3 % with 1 wasted re-run, 88.1 % with 1) and read
#: by the forty-sixth, which reached 42/43 and 41/42 (in-sample, their cases also train the learned fallback since):
#: their floors are one case less (41/43, 40/42). ZZD keeps no wasted re-run. ZZC keeps 1, a documented miss of the
#: forty-sixth pass (docs/taxonomy.md, "Forty-sixth pass"): a refused connection to bioconductor.org from a cluster
#: whose proxy setting was wrong, labelled configuration by its thread (the same curl 'Connection refused' is a
#: transient fault in most jobs and in the red team's recall probes), so its cap entry holds it at 1 of 43; none may
#: be added.
#: ZZE and ZZF were scored blind once after the forty-sixth pass (84.2 % with 4 wasted re-runs, 84.2 % with 2) and read
#: by the forty-seventh, which reached 37/38 and 38/38 (in-sample, their cases also train the learned fallback since):
#: their floors are one case less (36/38, 37/38). Neither keeps a wasted re-run (the forty-seventh pass's precision
#: rules took all six), so neither needs a cap entry.
#: ZZG and ZZH were scored blind once after the forty-seventh pass (90.3 % with no wasted re-run, 79.1 % with 2) and
#: read by the forty-eighth, which reached 31/31 and 40/43 (in-sample, their cases also train the learned fallback
#: since): their floors are one case less (30/31, 39/43). Neither keeps a wasted re-run (the forty-eighth pass's
#: precision rules took ZZH's two), so neither needs a cap entry. The forty-eighth pass's retrain moved ZV's two
#: learned oom verdicts (a rustc link SIGTERMed under memory pressure, snmalloc's 'Failed to allocate') from just
#: over the 0.9 resize bar to just under it (p 0.90 shown, 0.899...; docs/taxonomy.md, "Forty-eighth pass"): ZV
#: reaches 27/33 since and its floor is one case less (26/33).
#: ZZI and ZZJ were scored blind once after the forty-eighth pass (92.3 % with 1 wasted re-run, 94.4 % with 2) and
#: read by the forty-ninth, which reached 38/39 and 35/36 (in-sample, their cases also train the learned fallback
#: since): their floors are one case less (37/39, 34/36). ZZI keeps no wasted re-run; ZZJ keeps one (2.8 per 100, a
#: Kafka client's OutOfMemoryError read as heap exhaustion, docs/taxonomy.md "Forty-ninth pass"), under the default
#: cap, so neither needs a cap entry. The forty-ninth pass's retrain moved one of ZZH's learned oom verdicts (an nvcc
#: build whose tail is only ninja's FAILED line) under the 0.9 resize bar: ZZH reaches 39/43 since, its floor.
#: Session 28's floor on learned infrastructure retries (p >= 0.8, config/policy.toml) costs 11 retries in-sample
#: (the model was trained on these cases, so in-sample it is right where it speaks: no evidence either way; the
#: floor was set on the causal replay, docs/taxonomy.md "The learned infrastructure retry's floor"): ZG's floor
#: moves from 55/59 to 54/59; every other split stays at or above its floor.
DECISION_FLOORS = {"cases": 0.97, "tuning": 0.93, "heldout-a": 0.94, "heldout-b": 0.92, "heldout-c": 0.95,
                   "heldout-d": 0.97, "heldout-e": 0.978, "heldout-f": 0.967, "heldout-g": 0.89, "heldout-i": 0.904,
                   "heldout-j": 0.977, "heldout-k": 0.958, "heldout-l": 0.965, "heldout-m": 0.924, "heldout-n": 0.843,
                   "heldout-o": 0.946, "heldout-p": 0.911, "heldout-q": 0.916, "heldout-r": 0.944,
                   "heldout-s": 0.932, "heldout-t": 0.867, "heldout-u": 0.892,
                   "heldout-v": 0.847, "heldout-w": 0.971, "heldout-x": 0.913,
                   "heldout-y": 0.852, "heldout-z": 0.874, "heldout-za": 0.916,
                   "heldout-zb": 0.925, "heldout-zc": 0.913,
                   "heldout-zd": 0.926, "heldout-ze": 0.967, "heldout-zf": 0.934,
                   "heldout-zg": 0.915, "heldout-zh": 0.98, "heldout-zi": 0.953,
                   "heldout-zj": 0.911, "heldout-zk": 0.769, "heldout-zl": 0.931,
                   "heldout-zm": 0.955, "heldout-zn": 0.933, "heldout-zo": 0.942,
                   "heldout-zp": 0.877, "heldout-zq": 0.891, "heldout-zr": 0.942,
                   "heldout-zs": 0.9, "heldout-zt": 0.937, "heldout-zu": 0.911,
                   "heldout-zv": 0.787, "heldout-zw": 0.906, "heldout-zx": 0.939,
                   "heldout-zy": 0.953, "heldout-zz": 0.959,
                   "heldout-zza": 0.906, "heldout-zzb": 0.931,
                   "heldout-zzc": 0.953, "heldout-zzd": 0.952,
                   "heldout-zze": 0.947, "heldout-zzf": 0.973,
                   "heldout-zzg": 0.967, "heldout-zzh": 0.906,
                   "heldout-zzi": 0.948, "heldout-zzj": 0.944}
#: Deterministic re-runs allowed per split (3.5 per 100 unless listed). N keeps 3 of 83 (3.6 per 100), each a
#: documented miss of the fifteenth pass (docs/taxonomy.md, "Fifteenth pass"): a DNS failure and a clone
#: time-out labelled configuration after their maintainers (the same texts are transient in other splits and
#: in the red team's recall probes), and a test run's 1 h time limit whose SIGKILL prints the shell's 'Killed'.
#: None may be added. T keeps 4 of 68 (5.9 per 100), each a documented miss of the twentieth pass
#: (docs/taxonomy.md, "Twentieth pass"): its collector's traps, an 'LLVM ERROR: out of memory' and an ENOMEM that
#: were compiler bugs, a 502 from a repository that went away, and a 'reference is not a tree' after a history
#: rewrite (the same texts carry the opposite cause in other splits and in the red team's probes). None may be added.
#: V keeps 3 of 59 (5.1 per 100), each a documented miss of the twenty-second pass (docs/taxonomy.md, "Twenty-second
#: pass"): a Gradle daemon that disappeared for a commit message, an artifact upload's 500 from a server
#: misconfiguration, and a Java heap exhausted by a leak in the tests (the same texts are labelled transient or OOM in
#: other splits: heldout-n/-a, heldout-b, heldout-q/-s). None may be added.
#: X keeps 3 of 69 (4.3 per 100), each a documented miss of the twenty-fourth pass (docs/taxonomy.md, "Twenty-fourth
#: pass"): two parallel makes whose compiler could not open its output file in a directory not yet created (the
#: same line is a race labelled infrastructure in heldout-a, heldout-d and X itself), and a bare 'Killed' with make's
#: 'Error 137' that nobody diagnosed (labelled unknown; the same text is an OOM kill in some twenty cases of D to X).
#: None may be added.
WASTED_CAPS = {"heldout-n": 3 / 83, "heldout-t": 4 / 68, "heldout-v": 3 / 59, "heldout-x": 3 / 69, "heldout-zj": 1 / 45,
               "heldout-zl": 1 / 44, "heldout-zp": 2 / 49, "heldout-zq": 2 / 37,
               "heldout-zr": 1 / 52, "heldout-zs": 2 / 50, "heldout-zv": 1 / 33, "heldout-zzb": 1 / 29,
               "heldout-zzc": 1 / 43}


def test_every_split_keeps_its_decision_floor(taxonomy):
    import runpy
    score_mod = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "score_classify.py"))
    from retry_bot.policy import default_policy
    policy = default_policy()
    for split, floor in DECISION_FLOORS.items():
        s = score_mod["score"](split, score_mod["load_cases"](score_mod["SPLITS"][split]), taxonomy, policy)
        assert s.right / s.n >= floor, (split, s.row(), s.misses)
        assert s.wasted / s.n <= WASTED_CAPS.get(split, 0.035), (split, s.row())
