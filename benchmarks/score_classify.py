#!/usr/bin/env python3
"""Score the classifier and the shipped policy on the labelled job-log excerpts, split by split.

Prints, for each split of ``tests/data/joblogs`` (``cases`` = the original 73-case set, which
the rules were written against; ``tuning`` = new excerpts read while writing rules; ``heldout-a`` =
the first pass's held-out set, scored once at b543062 and then read, so now tuning data;
``heldout-b`` = excerpts collected before any second-pass rule, scored once at 20a0100 and then
read, so tuning data since; ``heldout-c`` = collected after that and before any rule written from
B's misses, scored once at a16d87a and then read, so tuning data since; ``heldout-d`` = collected
after A, B and C had all been read, by someone who neither read the rules nor ran the classifier
on it, scored once at 5c6641f and then read, so tuning data since; ``heldout-e`` = collected the
same way after A to D had all been read, scored before and after the fourth pass (at the merge of
h11s) and then read, so tuning data since; ``heldout-f`` = collected the same way after A to E had
all been read; ``heldout-g`` = collected the same way (aiming at GitLab logs) while F stayed sealed;
``heldout-h`` = collected the same way from GitLab CI job logs only while F and G stayed sealed (small,
18 cases, mostly infrastructure and configuration); F, G and H were scored blind once after the sixth
pass and then read by the seventh, so they are tuning data since; ``heldout-i`` = collected the same
way (105 cases, many CI systems, without reading any case of the other splits) while F, G and H stayed
sealed and the seventh pass was written from their misses, scored blind once after the seventh pass
(715f118) and then read by the eighth, so tuning data since; ``heldout-j`` = collected the same way
(89 cases, many CI systems) while the eighth pass was written from I's misses, scored blind once after
the eighth pass (691d7d5) and then read by the ninth, so tuning data since; ``heldout-k`` = collected
the same way (72 cases, many CI systems) while the ninth pass was written from J's misses, scored blind
by the lead after the eighth, ninth, tenth and eleventh passes (81.9 % each time) and then read by the
twelfth, so tuning data since; ``heldout-l`` = collected the same way (88 cases, many CI systems, 5
GitLab job logs) while the twelfth pass was written from K's misses, scored blind once after the twelfth
pass (60d930e: 84.1 %) and then read by the thirteenth, so tuning data since; ``heldout-m`` = collected
the same way (93 cases, many CI systems, 7 GitLab job logs) while the thirteenth pass was written from
L's misses, scored blind once after the thirteenth pass (a7ba0e2: 83.9 %) and then read by the fourteenth,
so tuning data since; ``heldout-n`` = collected the same way (83 cases, many CI systems, 5 GitLab job
logs) while the fourteenth pass was written from M's misses, scored blind once after the fourteenth pass
(0a492fb: 77.1 %) and then read by the fifteenth, so tuning data since; ``heldout-o`` and ``heldout-p``
= collected the same way by two collectors while the fifteenth pass was written from N's misses, each
audited against its sources by another engineer (who dropped the excerpts not found there), scored
blind once after the fifteenth pass (O 89.3 %, P 74.7 %) and then read by the sixteenth, so tuning data
since; ``heldout-q`` = collected the same way by a third collector meanwhile, audited, scored blind once
after the sixteenth pass (84.5 %) and then read by the seventeenth, so tuning data since; ``heldout-r`` =
collected the same way while the seventeenth pass was written from Q's misses, audited, scored blind once
after the seventeenth pass (88.9 %) and then read by the eighteenth, so tuning data since; ``heldout-s`` =
collected the same way (89 cases, 6 GitLab job logs) while the eighteenth pass was written from R's misses
and GitLab Runner's job-log catalogue from the runner's source, audited against its sources, scored blind once
after both (e11cc6b: 87.6 %) and then read by the nineteenth, so tuning data since; ``heldout-t`` =
collected the same way (68 cases after the lead dropped 1 duplicate, 2 GitLab job logs) while the nineteenth
pass was written from S's misses and GitHub Actions' job-log catalogue from its sources, audited against its
sources, scored blind once after both (77.9 %) and then read by the twentieth, so tuning data since;
``heldout-u`` = collected the same way (56 cases after its audit, 3 GitLab job logs) while the twentieth pass
was written from T's misses, audited against its sources, scored blind once after the twentieth pass (82.1 %)
and then read by the twenty-first, so tuning data since; ``heldout-v`` = collected the same way (59 cases
after its audit, 4 GitLab job logs) while the twenty-first pass was written from U's misses, audited against
its sources, scored blind once after the twenty-first pass (76b4ecb: 83.1 %) and then read by the
twenty-second, so tuning data since; ``heldout-w`` = collected the same way right after V (70 cases after its
audit, 7 GitLab job logs), audited against its sources, scored blind once after the twenty-second pass (91.4 %)
and then read by the twenty-third, so tuning data since; ``heldout-x`` = collected the same way
after W (69 cases after its audit, 4 GitLab), audited against its sources, scored blind once after the
twenty-third pass (87.0 %) and then read by the twenty-fourth, so tuning data since; ``heldout-y`` = collected
the same way after X (61 cases after its audit, no GitLab job log), audited against its sources, scored blind once
after the twenty-fourth pass (78.7 %) and then read by the twenty-fifth, so tuning data since;
``heldout-z`` = collected the same way after Y (56 cases after its audit, 4 GitLab), audited against its
sources, scored blind once after the twenty-fifth pass (87.5 %) and then read by the twenty-sixth, so tuning
data since; ``heldout-za`` = collected the same way while the twenty-sixth pass read Z (36 cases after its
audit, 2 GitLab job logs), audited against its sources, scored blind once after the twenty-sixth pass (83.3 %)
and then read by the twenty-seventh, so tuning data since; ``heldout-zb`` = collected the same way after ZA,
while the twenty-seventh pass read ZA (67 cases after its audit, 3 GitLab), audited against its sources,
scored blind once after the twenty-seventh pass (88.1 %) and then read by the twenty-eighth, so tuning data
since; ``heldout-zc`` = collected the same way after ZB, while the twenty-seventh pass read ZA (58 cases after its
audit, 3 GitLab), audited against its sources, scored blind once after the twenty-eighth pass (86.2 %) and then
read by the twenty-ninth, so tuning data since; ``heldout-zd`` = collected the same way after ZC, while the
twenty-eighth pass read ZB (68 cases after its audit, 2 GitLab), audited against its sources, scored blind once
after the twenty-ninth pass (80.9 %) and then read by the thirtieth, so tuning data since; ``heldout-ze`` =
collected the same way after ZD, while the twenty-ninth pass read ZC (61 cases after its audit, no GitLab job log),
scored blind once after the thirtieth pass (93.4 %) and then read by the thirty-first, so tuning data since;
``heldout-zf`` = collected the same way after ZE, while the thirty-first pass read ZE (46 cases after its audit),
audited against its sources, scored blind once after the thirty-first pass (b02e8a9: 89.1 %) and then read by the
thirty-second, so tuning data since; ``heldout-zg`` = collected the same way after ZF, while the thirty-second pass
was being written (59 cases, 4 GitLab), audited against its sources, scored blind once after the thirty-second pass
(cfd9096: 86.4 %) and then read by the thirty-third, so tuning data since; ``heldout-zh`` and ``heldout-zi`` =
collected the same way after ZG, while the thirty-second and thirty-third passes were written (50 and 43 cases after
their audits), audited against their sources, scored blind once after the thirty-third pass (6f66ed9: 94.0 % and
97.7 %) and then read by the thirty-fourth, so tuning data since; ``heldout-zj`` and ``heldout-zk`` = collected the
same way after ZI, at the same time by two collectors (one searching mainly GitHub threads, the other web pages;
45 and 13 cases, 1 and 3 GitLab), audited against their sources, scored blind once after the thirty-fourth pass (6a45aab: 88.9 % and
53.8 %) and then read by the thirty-fifth, so tuning data since; ``heldout-zl`` = collected the same way after ZJ and ZK, while the thirty-fifth pass was being written (44
cases after its audit, 2 GitLab), audited against its sources, scored blind once after the thirty-fifth pass
(49577af: 90.9 %) and then read by the thirty-sixth, so tuning data since; ``heldout-zm`` = collected the same way after ZL, while the thirty-fifth pass was being written (45 cases, no
GitLab), audited against its sources, scored blind once after the thirty-sixth pass (bd280f7: 84.4 %) and then read
by the thirty-seventh, so tuning data since; ``heldout-zn`` =
collected the same way after ZM, while the thirty-fifth pass was being written (45 cases, 1 GitLab), audited against
its sources, scored blind once after the thirty-seventh pass (cb56520: 84.4 %) and then read by the thirty-eighth, so
tuning data since; ``heldout-zo`` = collected the same way after ZN, while the thirty-seventh pass was being written
(35 cases after its audit, no GitLab), audited against its sources, scored blind once after the thirty-seventh pass
(cb56520: 91.4 %) and then read by the thirty-eighth, so tuning data since; ``heldout-zp`` =
collected the same way after ZO had been read by the thirty-eighth pass, searching mainly GitHub threads about
language ecosystems (49 cases, 3 GitLab), audited against its sources, scored blind once after the
thirty-eighth pass (cda2a95: 77.6 %) and then read by the thirty-ninth, so tuning data since; ``heldout-zq`` = collected the same way at the same time as ZP, searching mainly GitHub
threads about build systems, platforms and distributions (37 cases after its audit, no GitLab), audited against its
sources, scored blind once after the thirty-eighth pass (2eac1c0: 83.8 %) and then read by the thirty-ninth, so tuning
data since; ``heldout-zr`` =
collected the same way after ZP and ZQ, while the thirty-ninth pass was being written, searching mainly GitHub threads
about deployment, cloud and test tooling (52 cases, no GitLab), audited against its sources, scored blind once
after the thirty-ninth pass (ad1f479: 82.7 %) and then read by the fortieth, so tuning data since; ``heldout-zs`` =
collected the same way after ZR, while the thirty-ninth pass was being written, searching mainly GitHub threads about
container and Kubernetes-hosted CI, .NET, Go and mobile builds (50 cases after its audit, 1 GitLab), audited against
its sources, scored blind once after the fortieth pass (3fb9a6b: 82.0 %) and then read by the forty-first, so tuning
data since; ``heldout-zt`` =
collected the same way after ZS, while the thirty-ninth pass was being written, searching mainly GitHub threads about
scientific and HPC software builds (48 cases, 1 GitLab), audited against its sources, scored blind once after the
fortieth pass (3fb9a6b: 89.6 %) and then read by the forty-first, so tuning data since; ``heldout-zu`` =
collected the same way after ZT, while the forty-first pass was being written, searching mainly GitHub threads about
web front-end, Python packaging, JVM builds and services in CI (45 cases after its audit, no GitLab), audited against its
sources, scored blind once after the forty-first pass (bf92aa8: 82.2 %) and then read by the forty-second, so tuning
data since; ``heldout-zv`` = collected the same way after ZU, after the forty-second pass, searching mainly GitHub
threads about native toolchains and their build drivers, embedded and cross builds and game-engine builds (33 cases
after its audit, no GitLab), audited against its sources, scored blind once after the forty-second pass (b59b5b4:
78.8 %) and then read by the forty-third;
``heldout-zw`` = collected the same way beside ZV, searching mainly GitHub threads about data and machine-learning
builds, less common language ecosystems, reproducible-build systems and GitLab CI jobs (32 cases after its audit, 2
GitLab), audited against its sources, scored blind once after the forty-second pass (c69c751: 78.1 %) and then
read by the forty-third; ``heldout-zx`` =
collected the same way beside ZV and ZW, searching mainly GitHub threads about GitLab's own CI machinery, security and
quality scanners, documentation and site builds and machine-image and VM tooling (33 cases after its audit, 1 GitLab),
audited against its sources, scored blind once after the forty-second pass (4d95faf: 78.8 %) and then read by the
forty-third, so tuning data since; ``heldout-zy`` = collected the same way after ZX, while the forty-third pass was
being written, searching mainly GitHub threads about databases' and distributed systems' own CI, kernels and system software, and
browsers and JavaScript engines (43 cases after its audit, 1 GitLab), and ``heldout-zz`` = collected beside it,
about robotics builds, monorepo and remote-cache build tools, Windows-specific CI and smart-contract toolchains (49
cases after its audit, no GitLab), both audited against their sources, scored blind once after the forty-third pass
(eb77e62: ZY 88.4 %, ZZ 85.7 %) and then read by the forty-fourth, so tuning data since; ``heldout-zzb`` = collected
the same way after ZZ, while the forty-fourth pass was being written, searching mainly GitHub threads about
observability and service-mesh projects, proof assistants and mobile app CI (29 cases after its audit, 1 GitLab),
audited against its sources, scored blind once after the forty-fourth pass (a3e1745: 86.2 %) and then read by the
forty-fifth, so tuning data since; ``heldout-zza`` = collected beside
it, about desktop and Linux application packaging, media and codec projects and networking software (32 cases after
its audit, 2 GitLab), audited against its sources, scored blind once after the forty-fourth pass (6ff7bdb: 90.6 %)
and then read by the forty-fifth, so tuning data since; ``heldout-zzc`` = collected the same way after ZZB, once the
forty-fifth pass was written, searching mainly GitHub threads about scientific computing and bioinformatics builds (43
cases after its audit, 1 GitLab), audited against its sources, scored blind once after the forty-fifth pass (641d78d:
95.3 %) and then read by the forty-sixth, so tuning data since; ``heldout-zzd`` = collected beside it, about security
libraries, infrastructure-as-code tooling, PHP, Ruby and Perl ecosystems and static-site builds (42 cases after its
audit, no GitLab), audited against its sources, scored blind once after the forty-fifth pass (641d78d: 88.1 %) and
then read by the forty-sixth, so tuning data since; ``heldout-zze`` = collected beside ZZC and ZZD, before the
forty-sixth pass was written, searching mainly GitHub threads about serverless and cloud deployment tools and frontend
bundlers and app frameworks (38 cases after its audit, 1 GitLab), audited against its sources, scored blind once after
the forty-sixth pass (ef2628d: 84.2 %) and then read by the forty-seventh, so tuning data since; ``heldout-zzf`` =
collected beside it, about hardware design and EDA tools, Scala, Elixir and Erlang, Dart and Flutter and newer systems
languages (38 cases after its audit, no GitLab), audited against its sources, scored blind once after the forty-sixth
pass (ef2628d: 84.2 %) and then read by the forty-seventh, so tuning data since; ``heldout-zzg`` = collected the same
way after ZZF, while the forty-seventh pass was written, searching mainly GitHub threads about C/C++ package managers
and distribution build services (31 cases after its audit, 2 GitLab), audited against its sources, scored blind
once after the forty-seventh pass (848e6c1: 90.3 %) and then read by the forty-eighth, so tuning data since;
``heldout-zzh`` = collected beside it, about GPU and accelerator builds, LLM inference and training tooling and Swift
on Linux (43 cases after its audit, no GitLab), audited against its sources, scored blind once after the
forty-seventh pass (848e6c1: 79.1 %) and then read by the forty-eighth, so tuning data since; ``heldout-zzi`` =
collected the same way after ZZH, while the forty-eighth pass was written, searching mainly GitHub threads about
audio, music and creative-tools software and publishing toolchains (39 cases after its audit, 3 GitLab), audited
against its sources, scored blind once after the forty-eighth pass (486b4e3: 92.3 %) and then read by the
forty-ninth, so tuning data since; ``heldout-zzj`` = collected beside it, about messaging, streaming and queueing
systems, payment and fintech SDKs and API client generators (36 cases after its audit, no GitLab), audited against
its sources, scored blind once after the forty-eighth pass (486b4e3: 94.4 %) and then read by the forty-ninth, so
tuning data since):

* right decision: the shipped default policy (``retry_bot.policy.default_policy``) with the memory
  limit in force known (``KUBERNETES_MEMORY_LIMIT=4Gi`` in the job's variables, as in
  production) decides what the label wants: ``oom`` -> resize, ``infrastructure`` -> retry,
  everything else -> none;
* family right: the classifier's family equals the label's;
* OOM resized, infrastructure retried: of the cases so labelled;
* deterministic re-runs per 100 jobs: cases labelled neither ``oom`` nor ``infrastructure`` that
  the bot would re-run (retry or resize), per 100 cases of the split;
* unknown %: cases the classifier left in family ``unknown``.

Usage::

    .venv/bin/python benchmarks/score_classify.py [--split heldout-f] [--misses]

Without ``--split`` every split is scored but those in ``SEALED``, which are scored only when named.
``--misses`` lists the wrong decisions.  It refuses a split in ``SEALED`` (none now; the mechanism is kept for the next sets)
unless ``--i-am-done-tuning`` is given: a held-out split is only honest if its cases never guide a rule.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retry_bot.classify import classify, load_taxonomy  # noqa: E402
from retry_bot.decide import Action, ClassUsage, decide  # noqa: E402
from retry_bot.model import JobFacts  # noqa: E402
from retry_bot.policy import default_policy  # noqa: E402

DATA = ROOT / "tests" / "data" / "joblogs"
SPLITS = {"cases": DATA / "cases.toml", "tuning": DATA / "tuning.toml",
          "heldout-a": DATA / "heldout-a.toml", "heldout-b": DATA / "heldout-b.toml",
          "heldout-c": DATA / "heldout-c.toml", "heldout-d": DATA / "heldout-d.toml",
          "heldout-e": DATA / "heldout-e.toml", "heldout-f": DATA / "heldout-f.toml",
          "heldout-g": DATA / "heldout-g.toml", "heldout-h": DATA / "heldout-h.toml",
          "heldout-i": DATA / "heldout-i.toml", "heldout-j": DATA / "heldout-j.toml",
          "heldout-k": DATA / "heldout-k.toml", "heldout-l": DATA / "heldout-l.toml",
          "heldout-m": DATA / "heldout-m.toml", "heldout-n": DATA / "heldout-n.toml",
          "heldout-o": DATA / "heldout-o.toml", "heldout-p": DATA / "heldout-p.toml",
          "heldout-q": DATA / "heldout-q.toml", "heldout-r": DATA / "heldout-r.toml",
          "heldout-s": DATA / "heldout-s.toml", "heldout-t": DATA / "heldout-t.toml",
          "heldout-u": DATA / "heldout-u.toml", "heldout-v": DATA / "heldout-v.toml",
          "heldout-w": DATA / "heldout-w.toml", "heldout-x": DATA / "heldout-x.toml",
          "heldout-y": DATA / "heldout-y.toml", "heldout-z": DATA / "heldout-z.toml",
          "heldout-za": DATA / "heldout-za.toml", "heldout-zb": DATA / "heldout-zb.toml",
          "heldout-zc": DATA / "heldout-zc.toml",
          "heldout-zd": DATA / "heldout-zd.toml",
          "heldout-ze": DATA / "heldout-ze.toml",
          "heldout-zf": DATA / "heldout-zf.toml",
          "heldout-zg": DATA / "heldout-zg.toml",
          "heldout-zh": DATA / "heldout-zh.toml",
          "heldout-zi": DATA / "heldout-zi.toml",
          "heldout-zj": DATA / "heldout-zj.toml",
          "heldout-zk": DATA / "heldout-zk.toml",
          "heldout-zl": DATA / "heldout-zl.toml",
          "heldout-zm": DATA / "heldout-zm.toml",
          "heldout-zn": DATA / "heldout-zn.toml",
          "heldout-zo": DATA / "heldout-zo.toml",
          "heldout-zp": DATA / "heldout-zp.toml",
          "heldout-zq": DATA / "heldout-zq.toml",
          "heldout-zr": DATA / "heldout-zr.toml",
          "heldout-zs": DATA / "heldout-zs.toml",
          "heldout-zt": DATA / "heldout-zt.toml",
          "heldout-zu": DATA / "heldout-zu.toml",
          "heldout-zv": DATA / "heldout-zv.toml",
          "heldout-zw": DATA / "heldout-zw.toml",
          "heldout-zx": DATA / "heldout-zx.toml",
          "heldout-zy": DATA / "heldout-zy.toml",
          "heldout-zz": DATA / "heldout-zz.toml",
          "heldout-zzb": DATA / "heldout-zzb.toml",
          "heldout-zza": DATA / "heldout-zza.toml",
          "heldout-zzc": DATA / "heldout-zzc.toml",
          "heldout-zzd": DATA / "heldout-zzd.toml",
          "heldout-zze": DATA / "heldout-zze.toml",
          "heldout-zzf": DATA / "heldout-zzf.toml",
          "heldout-zzg": DATA / "heldout-zzg.toml",
          "heldout-zzh": DATA / "heldout-zzh.toml",
          "heldout-zzi": DATA / "heldout-zzi.toml",
          "heldout-zzj": DATA / "heldout-zzj.toml"}
#: Splits whose per-case misses must not be read while rules are being written (held-out B, scored
#: once at 20a0100, C, scored once at a16d87a, D, scored once at 5c6641f, and E, scored before and
#: after the fourth pass, were read afterwards: they are tuning data since; F, G and H, collected
#: blind for the acceptance figures, were scored once by the lead after the sixth pass and then read
#: by the seventh: tuning data since; I, collected while the seventh pass was written, was scored once
#: after it and read by the eighth: tuning data since; J, collected while the eighth was written, was scored
#: once after it and read by the ninth: tuning data since; K, collected blind while rules were written
#: from J's misses, was scored blind after the eighth, ninth, tenth and eleventh passes (81.9 % each
#: time) and then read by the twelfth: tuning data since; L, collected blind while the twelfth pass was
#: written from K's misses, was scored blind once after it (84.1 %) and then read by the thirteenth: tuning
#: data since; M, collected blind while the thirteenth pass was written from L's misses, was scored blind once
#: after it (83.9 %) and then read by the fourteenth: tuning data since; N, collected blind while the
#: fourteenth pass was written from M's misses, was scored blind once after it (77.1 %) and then read by the
#: fifteenth: tuning data since; O and P, collected blind while the fifteenth pass was written from N's
#: misses and audited against their sources, were scored blind once after it (89.3 % and 74.7 %) and then
#: read by the sixteenth: tuning data since; Q, collected blind meanwhile by someone else, was scored blind once
#: after the sixteenth pass (84.5 %) and then read by the seventeenth: tuning data since; R, collected blind
#: while the seventeenth pass was written from Q's misses and audited against its sources, was scored blind once
#: after it (88.9 %) and then read by the eighteenth: tuning data since; S, collected blind while the eighteenth
#: pass and GitLab Runner's job-log catalogue were written and audited against its sources, was scored blind once
#: after both (87.6 %) and then read by the nineteenth: tuning data since; T, collected blind while the
#: nineteenth pass and GitHub Actions' job-log catalogue were written and audited against its sources, was scored
#: blind once after both (77.9 %) and then read by the twentieth: tuning data since; U, collected blind while the
#: twentieth pass was written and audited against its sources, was scored blind once after it (82.1 %) and then
#: read by the twenty-first: tuning data since; V, collected blind while the twenty-first pass was written and
#: audited against its sources, was scored blind once after it (76b4ecb: 83.1 %) and then read by the
#: twenty-second: tuning data since; W, collected blind right after V the same way and audited against its
#: sources, was scored blind once after the twenty-second pass (91.4 %) and then read by the twenty-third: tuning
#: data since; X, collected blind after W the same way and audited against its sources, was scored blind once
#: after the twenty-third pass (87.0 %) and then read by the twenty-fourth: tuning data since; Y, collected
#: blind after X the same way and audited against its sources, was scored blind once after the twenty-fourth pass
#: (78.7 %) and then read by the twenty-fifth: tuning data since; Z, collected blind after Y the same way and
#: audited against its sources, was scored blind once after the twenty-fifth pass (87.5 %) and then read by
#: the twenty-sixth: tuning data since; ZA, collected blind while the twenty-sixth pass was written and audited
#: against its sources, was scored blind once after the twenty-sixth pass (83.3 %) and then read by the
#: twenty-seventh: tuning data since; ZB, collected blind after ZA while the twenty-seventh pass read ZA and
#: audited against its sources, was scored blind once after the twenty-seventh pass (88.1 %) and then read by
#: the twenty-eighth: tuning data since; ZC, collected blind after ZB while the twenty-seventh pass read ZA, and
#: audited against its sources, was scored blind once after the twenty-eighth pass (86.2 %) and then read by
#: the twenty-ninth: tuning data since; ZD, collected blind after ZC while the twenty-eighth pass read ZB, and
#: audited against its sources, was scored blind once after the twenty-ninth pass (80.9 %) and then read by
#: the thirtieth: tuning data since; ZE, collected blind after ZD while the twenty-ninth pass read ZC, and
#: audited against its sources, was scored blind once after the thirtieth pass (93.4 %) and then read by the
#: thirty-first: tuning data since; ZF, collected blind after ZE while the thirty-first pass read ZE, and audited
#: against its sources (46 kept), was scored blind once after the thirty-first pass (b02e8a9: 89.1 %) and then read
#: by the thirty-second: tuning data since; ZG, collected blind after ZF while the thirty-second pass was written,
#: and audited against its sources (59 kept), was scored blind once after the thirty-second pass (cfd9096: 86.4 %)
#: and then read by the thirty-third: tuning data since; ZH and ZI, collected blind after ZG while the thirty-second
#: and thirty-third passes were written, and audited against their sources (50 and 43 kept), were scored blind once
#: after the thirty-third pass (6f66ed9: 94.0 % and 97.7 %) and then read by the thirty-fourth: tuning data since.
#: ZJ and ZK, collected blind after ZI at the same time by two collectors, and audited against their sources (45 and
#: 13 kept), were scored blind once after the thirty-fourth pass (6a45aab: 88.9 % and 53.8 %) and then read by the
#: thirty-fifth: tuning data since; ZL, collected blind after them while the
#: thirty-fifth pass was written, and audited against its sources (44 kept), was scored blind once after the
#: thirty-fifth pass (49577af: 90.9 %) and then read by the thirty-sixth: tuning data since; ZM, collected blind after ZL while the thirty-fifth pass was written, and audited against its
#: sources (45 kept), was scored blind once after the thirty-sixth pass (bd280f7: 84.4 %) and then read by the
#: thirty-seventh: tuning data since; ZN, collected blind after ZM, and ZO, collected blind after ZN while the
#: thirty-seventh pass was written, audited (45 and 35 kept), were scored blind once after the thirty-seventh pass
#: (cb56520: 84.4 % and 91.4 %) and then read by the thirty-eighth: tuning data since; ZP, collected blind after ZO had
#: been read by the thirty-eighth pass, audited (49 kept), and ZQ, collected blind at the same time as ZP, audited
#: (37 kept), were scored blind once after the thirty-eighth pass (cda2a95 and 2eac1c0: 77.6 % and 83.8 %) and then
#: read by the thirty-ninth: tuning data since; ZR, collected blind after ZP and ZQ while the thirty-ninth pass was written,
#: audited (52 kept), was scored blind once after the thirty-ninth pass (ad1f479: 82.7 %) and then read by the
#: fortieth: tuning data since; ZS and ZT, collected blind after ZR while the thirty-ninth pass was written, audited
#: (50 and 48 kept), were scored blind once after the fortieth pass (3fb9a6b: 82.0 % and 89.6 %) and then read by
#: the forty-first: tuning data since; ZU, collected blind after ZT while the forty-first pass was written,
#: audited (45 kept), was scored blind once after the forty-first pass (bf92aa8: 82.2 %) and then read by the
#: forty-second: tuning data since; ZV, collected blind after ZU (after the forty-second pass), audited (33
#: kept), ZW, collected blind beside ZV, audited (32 kept), and ZX, collected blind beside ZV and ZW, audited (33
#: kept), were scored blind once after the forty-second pass (ZV b59b5b4 78.8 %, ZW c69c751 78.1 %, ZX 4d95faf
#: 78.8 %) and then read by the forty-third: tuning data since; ZY and ZZ, collected blind while the forty-third pass
#: was written, audited (43 and 49 kept), were scored blind once after the forty-third pass (eb77e62: ZY 88.4 %,
#: ZZ 85.7 %) and then read by the forty-fourth: tuning data since; ZZB, collected blind while the forty-fourth pass
#: was written, audited (29 kept), and ZZA, collected beside it, audited (32 kept), were scored blind once after
#: the forty-fourth pass (ZZA 6ff7bdb 90.6 %, ZZB a3e1745 86.2 %) and then read by the forty-fifth: tuning data since;
#: ZZC, collected blind after the forty-fifth pass was written, audited (43 kept), and ZZD, collected beside ZZC,
#: audited (42 kept), were scored blind once after the forty-fifth pass (641d78d: ZZC 95.3 %, ZZD 88.1 %) and then
#: read by the forty-sixth: tuning data since; ZZE, collected blind beside ZZC and ZZD before the forty-sixth pass was
#: written, audited (38 kept), and ZZF, collected beside ZZE, audited (38 kept), were scored blind once after the
#: forty-sixth pass (ef2628d: ZZE 84.2 %, ZZF 84.2 %) and then read by the forty-seventh: tuning data since; ZZG,
#: collected blind while the forty-seventh pass was written, audited (31 kept), and ZZH, collected beside ZZG, audited
#: (43 kept), were scored blind once after the forty-seventh pass (848e6c1: ZZG 90.3 %, ZZH 79.1 %) and then read by
#: the forty-eighth: tuning data since; ZZI, collected blind while the forty-eighth pass was written, audited (39
#: kept), and ZZJ, collected beside ZZI, audited (36 kept), were scored blind once after the forty-eighth pass
#: (486b4e3: ZZI 92.3 %, ZZJ 94.4 %) and then read by the forty-ninth: tuning data since.
SEALED: set[str] = set()
#: The memory limit in force for every scored job (the bot knows it in production from the job's
#: variables or its usage record); without it the decision could not size a resize.
LIMIT = "4Gi"
WANTED = {"oom": Action.RESIZE, "infrastructure": Action.RETRY}


@dataclass
class Score:
    split: str
    n: int
    right: int
    family: int
    oom: int
    oom_resized: int
    infra: int
    infra_retried: int
    wasted: int
    unknown: int
    misses: list[tuple[str, str, str, str, str]]

    def row(self) -> str:
        pct = lambda a, b: f"{100 * a / b:5.1f}%" if b else "   n/a"  # noqa: E731
        return (f"{self.split:9} {self.n:4d}  right {pct(self.right, self.n)}  family {pct(self.family, self.n)}  "
                f"OOM resized {self.oom_resized:2d}/{self.oom:<2d}  infra retried {self.infra_retried:2d}/{self.infra:<2d}  "
                f"det. re-runs/100 {100 * self.wasted / self.n:4.1f}  unknown {pct(self.unknown, self.n)}")


def load_cases(path: Path) -> list[dict]:
    return tomllib.loads(path.read_text("utf-8"))["case"]


def case_facts(i: int, c: dict) -> JobFacts:
    """The job facts of labelled case ``c`` (job id ``i``), with the memory limit in force known."""
    return JobFacts(job_id=i, name=c["id"], failure_reason=c.get("failure_reason"),
                    exit_code=c.get("exit_code"), status=c.get("status", "failed"),
                    variables={"KUBERNETES_MEMORY_LIMIT": LIMIT})


def count(s, label: str, family: str, got: Action) -> None:
    """Add one case (labelled ``label``, classified ``family``, decided ``got``) to tally ``s``."""
    want = WANTED.get(label, Action.NONE)
    s.right += got == want
    s.family += family == label
    s.unknown += family == "unknown"
    if label == "oom":
        s.oom += 1
        s.oom_resized += got == Action.RESIZE
    elif label == "infrastructure":
        s.infra += 1
        s.infra_retried += got == Action.RETRY
    elif got != Action.NONE:
        s.wasted += 1


def score(split: str, cases: list[dict], taxonomy, policy) -> Score:
    s = Score(split, len(cases), 0, 0, 0, 0, 0, 0, 0, 0, [])
    for i, c in enumerate(cases, 1):
        facts = case_facts(i, c)
        verdict = classify(facts, c["excerpt"].encode("utf-8"), taxonomy)
        got = decide(facts, verdict, [], policy, ClassUsage()).action
        count(s, c["family"], verdict.family.value, got)
        if got != WANTED.get(c["family"], Action.NONE) or verdict.family.value != c["family"]:
            s.misses.append((c["id"], c["family"], verdict.family.value, verdict.rule, got.value))
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=sorted(SPLITS), action="append",
                    help="score only this split (repeatable; default: all)")
    ap.add_argument("--misses", action="store_true", help="list wrong decisions and families")
    ap.add_argument("--i-am-done-tuning", action="store_true",
                    help="allow --misses on a sealed held-out split (its figures stop being held-out)")
    args = ap.parse_args(argv)
    taxonomy = load_taxonomy()
    policy = default_policy()
    for split in args.split or list(SPLITS):
        if not args.split and split in SEALED:
            # a sealed split is scored once, on purpose, by naming it: a run over every split while rules
            # are written must not show its figures again and again
            print(f"{split:12} sealed: not scored here (name it with --split to score it once)")
            continue
        s = score(split, load_cases(SPLITS[split]), taxonomy, policy)
        print(s.row())
        if args.misses and split in SEALED and not args.i_am_done_tuning:
            print(f"    (misses of {split} not listed: it is held out; see --i-am-done-tuning)")
        elif args.misses:
            for m in s.misses:
                print(f"    {m[0]:45} label {m[1]:15} got {m[2]:15} rule {m[3]:35} decision {m[4]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
