"""GitLab's ``failure_reason`` values: the Rails enum (old and GitLab 19.0 split names) and the runner's own."""

from __future__ import annotations

__all__ = ["RAILS_FAILURE_REASONS", "RUNNER_FAILURE_REASONS", "KNOWN_FAILURE_REASONS", "is_known_failure_reason"]

#: ``app/models/concerns/enums/ci/commit_status.rb`` (see gitlab-mechanics §4.1).
RAILS_FAILURE_REASONS: frozenset[str] = frozenset("""
unknown_failure script_failure api_failure stuck_or_timeout_failure runner_system_failure
missing_dependency_failure runner_unsupported stale_schedule job_execution_timeout
archived_failure unmet_prerequisites scheduler_failure data_integrity_failure
forward_deployment_failure user_blocked project_deleted ci_quota_exceeded
pipeline_loop_detected no_matching_runner trace_size_exceeded builds_disabled
environment_creation_failure deployment_rejected failed_outdated_deployment_job
job_execution_server_timeout stuck_pending_with_matching_runners
stuck_pending_no_matching_runners no_updates_running no_updates_canceling
server_timeout_running server_timeout_canceling runner_configuration_error
runner_external_dependency_failure runner_interrupted protected_environment_failure
insufficient_bridge_permissions downstream_bridge_project_not_found invalid_bridge_trigger
upstream_bridge_project_not_found insufficient_upstream_permissions
bridge_pipeline_is_child_pipeline downstream_pipeline_creation_failed
secrets_provider_not_found reached_max_descendant_pipelines_depth ip_restriction_failure
reached_max_pipeline_hierarchy_size reached_downstream_pipeline_trigger_rate_limit
duo_workflow_not_allowed job_router_failure job_token_expired id_token_burned_project_path
downstream_project_trigger_resolved_to_empty
""".split())

#: Reasons the runner itself reports (``common/network.go``), some mapped before reaching Rails.
RUNNER_FAILURE_REASONS: frozenset[str] = frozenset({
    "script_failure", "runner_system_failure", "job_execution_timeout", "image_pull_failure",
    "unknown_failure", "runner_configuration_error", "runner_external_dependency_failure",
    "runner_interrupted", "job_canceled",
})

KNOWN_FAILURE_REASONS: frozenset[str] = RAILS_FAILURE_REASONS | RUNNER_FAILURE_REASONS


def is_known_failure_reason(reason: str | None) -> bool:
    """True for ``None`` (no reason) and for every reason GitLab or the runner can report."""
    return reason is None or reason.strip().lower() in KNOWN_FAILURE_REASONS
