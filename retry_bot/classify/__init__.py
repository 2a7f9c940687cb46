"""Failure classification for the retry bot: a data-driven taxonomy over plain facts.

Public API (pure, no I/O except reading the files you name)::

    tax = load_taxonomy([Path("/etc/retry-bot/taxonomy.d/site.toml")])
    tail = read_trace_tail(Path("job.log"))                 # last 256 KiB, bounded memory
    record, rejected = extract_verified_record(tail, {"farm-1": key})
    verdict = classify(facts, tail, tax, record)           # -> Classification

See ``docs/taxonomy.md`` for the rule format and the precedence of stages.
"""

from retry_bot.classify.engine import classify, effective_exit_code
from retry_bot.classify.jobjson import facts_from_job_json
from retry_bot.classify.reasons import KNOWN_FAILURE_REASONS, is_known_failure_reason
from retry_bot.classify.record import extract_verified_record
from retry_bot.classify.taxonomy import (
    Pattern,
    Rule,
    Stage,
    Taxonomy,
    compile_pattern,
    default_taxonomy_text,
    load_taxonomy,
    taxonomy_from_text,
)
from retry_bot.classify.trace import DEFAULT_TAIL_BYTES, TraceText, clean_trace, read_trace_tail

__all__ = [
    "DEFAULT_TAIL_BYTES",
    "KNOWN_FAILURE_REASONS",
    "is_known_failure_reason",
    "Pattern",
    "Rule",
    "Stage",
    "Taxonomy",
    "TraceText",
    "classify",
    "clean_trace",
    "compile_pattern",
    "default_taxonomy_text",
    "effective_exit_code",
    "extract_verified_record",
    "facts_from_job_json",
    "load_taxonomy",
    "read_trace_tail",
    "taxonomy_from_text",
]
