"""runner-wrapper: a GitLab Runner custom executor driver that measures what builds really use.

Every build stage runs in its own cgroup (v2 or v1; a psutil fallback where no
cgroup can be made), limits come from the job's ``KUBERNETES_*`` variables, and
the kernel's own peak and OOM counters become a signed usage record
(:mod:`runner_wrapper.record`) that the retry bot reads.

Shared contract modules, also used by :mod:`retry_bot`:

- :mod:`runner_wrapper.quantity`: Kubernetes quantities (``2Gi``, ``750m``);
- :mod:`runner_wrapper.record`: the usage record, its HMAC signature and job-log marker;
- :mod:`runner_wrapper.logconfig`: structlog set-up for both programs.
"""

__version__ = "0.1.0"
DRIVER_NAME = "gitlab-rightsizer"
