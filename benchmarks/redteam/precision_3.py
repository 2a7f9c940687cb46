from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
p("buildkit-run-exit1-after-curl", "build_error", "docker build -t app .",
"""#8 [4/6] RUN curl -fsSL https://example.com/install.sh | sh && make -C /src
#8 0.412 Installing toolchain...
#8 2.118 make: Entering directory '/src'
#8 2.301 main.c:12:10: fatal error: config.h: No such file or directory
#8 2.302 compilation terminated.
#8 2.303 make: *** [Makefile:4: main.o] Error 1
#8 ERROR: process "/bin/sh -c curl -fsSL https://example.com/install.sh | sh && make -C /src" did not complete successfully: exit code: 2
------
 > [4/6] RUN curl -fsSL https://example.com/install.sh | sh && make -C /src:
2.303 make: *** [Makefile:4: main.o] Error 1
------
ERROR: failed to solve: process "/bin/sh -c curl -fsSL https://example.com/install.sh | sh && make -C /src" did not complete successfully: exit code: 2""")
p("buildkit-run-test-prints-137", "build_error", "docker build -t app .",
"""#11 [6/7] RUN go test ./...
#11 3.101 --- FAIL: TestSupervisorRestart (0.20s)
#11 3.102     supervisor_test.go:40: child exit code 137, want 0
#11 3.110 FAIL
#11 3.110 FAIL	example.com/sup	0.214s
#11 ERROR: process "/bin/sh -c go test ./..." did not complete successfully: exit code: 1
------
 > [6/7] RUN go test ./...:
3.110 FAIL	example.com/sup	0.214s
------
ERROR: failed to solve: process "/bin/sh -c go test ./..." did not complete successfully: exit code: 1""")
p("buildkit-run-wget-4-wrongurl", "config_error", "docker build -t app .",
"""#5 [2/4] RUN wget -q https://github.com/acme/tool/releases/download/v9/tool.tgz
#5 0.733 wget: server returned error: HTTP/1.1 404 Not Found
#5 ERROR: process "/bin/sh -c wget -q https://github.com/acme/tool/releases/download/v9/tool.tgz" did not complete successfully: exit code: 8
------
ERROR: failed to solve: process "/bin/sh -c wget -q https://github.com/acme/tool/releases/download/v9/tool.tgz" did not complete successfully: exit code: 8""")
p("buildkit-run-busybox-wget-dns-typo", "config_error", "docker build -t app .",
"""#5 [2/4] RUN wget -q https://githbu.com/acme/tool.tgz
#5 0.233 wget: bad address 'githbu.com'
#5 ERROR: process "/bin/sh -c wget -q https://githbu.com/acme/tool.tgz" did not complete successfully: exit code: 4
------
ERROR: failed to solve: process "/bin/sh -c wget -q https://githbu.com/acme/tool.tgz" did not complete successfully: exit code: 4""")
p("docker-legacy-run-137-test", "build_error", "docker build -t app .",
"""Step 7/9 : RUN ./run-tests.sh
 ---> Running in 3c2b1a0f
test_kill_child ... expected exit status 137 from child, got 0
1 test failed
The command '/bin/sh -c ./run-tests.sh' returned a non-zero code: 1""")
p("buildkit-copy-missing", "build_error", "docker build -t app .",
"""#7 [3/5] COPY dist/ /app/
#7 ERROR: failed to calculate checksum of ref 1a2b::3c4d: "/dist": not found
------
ERROR: failed to solve: failed to compute cache key: failed to calculate checksum of ref 1a2b::3c4d: "/dist": not found""")
p("buildkit-from-typo", "config_error", "docker build -t app .",
"""#2 [internal] load metadata for docker.io/library/pyhton:3.12-slim
#2 ERROR: pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed
------
ERROR: failed to solve: pyhton:3.12-slim: pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed""")
p("docker-push-denied-ns", "config_error", "docker push registry.gitlab.com/other/project/app:1.0",
"""The push refers to repository [registry.gitlab.com/other/project/app]
5f70bf18a086: Preparing
denied: requested access to the resource is denied""")
p("docker-push-unauth-no-login", "config_error", "docker push registry.example.com/team/app:1.0",
"""The push refers to repository [registry.example.com/team/app]
5f70bf18a086: Preparing
a3b5c80a4eba: Preparing
5f70bf18a086: Pushing [=>                                                 ]  1.2MB/40MB
unauthorized: authentication required""")
p("dind-missing-service", "config_error", "docker info",
"""Client:
 Version:    24.0.7
Server:
ERROR: error during connect: Get "http://docker:2375/v1.24/info": dial tcp: lookup docker on 10.96.0.10:53: no such host
errors pretty printing info""")
p("docker-sock-not-mounted", "config_error", "docker build -t app .",
"""Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?""")
p("kubectl-app-imagepull-typo", "config_error", "kubectl rollout status deploy/web --timeout=120s && kubectl get pods",
"""Waiting for deployment "web" rollout to finish: 0 of 1 updated replicas are available...
error: timed out waiting for the condition
$ kubectl get pods -l app=web
NAME                   READY   STATUS             RESTARTS   AGE
web-6d4cf56db6-x2x9q   0/1     ImagePullBackOff   0          2m1s""")
p("kubectl-describe-app-errimagepull", "config_error", "kubectl describe pod -l app=web",
"""Events:
  Type     Reason     Age                From               Message
  ----     ------     ----               ----               -------
  Normal   Pulling    40s (x3 over 90s)  kubelet            Pulling image "registry.example.com/web:v1.2.3-typo"
  Warning  Failed     40s (x3 over 90s)  kubelet            Failed to pull image "registry.example.com/web:v1.2.3-typo": rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/web:v1.2.3-typo": failed to resolve reference "registry.example.com/web:v1.2.3-typo": registry.example.com/web:v1.2.3-typo: not found
  Warning  Failed     40s (x3 over 90s)  kubelet            Error: ErrImagePull
  Normal   BackOff    5s (x5 over 89s)   kubelet            Back-off pulling image "registry.example.com/web:v1.2.3-typo"
  Warning  Failed     5s (x5 over 89s)   kubelet            Error: ImagePullBackOff""")
p("helm-upgrade-crashloop", "build_error", "helm upgrade --install web ./chart --wait --timeout 5m",
"""Release "web" does not exist. Installing it now.
Error: INSTALLATION FAILED: context deadline exceeded""")
p("helm-template-error", "config_error", "helm upgrade --install web ./chart",
"""Error: UPGRADE FAILED: template: web/templates/deployment.yaml:24:28: executing "web/templates/deployment.yaml" at <.Values.image.tag>: nil pointer evaluating interface {}.tag""")
p("kubectl-apply-invalid", "config_error", "kubectl apply -f k8s/",
"""deployment.apps/web configured
The Service "web" is invalid: spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive""")
p("kubectl-forbidden", "config_error", "kubectl apply -f k8s/",
"""Error from server (Forbidden): error when retrieving current configuration of:
Resource: "apps/v1, Resource=deployments", GroupVersionKind: "apps/v1, Kind=Deployment"
Name: "web", Namespace: "prod"
from server for: "k8s/deploy.yaml": deployments.apps "web" is forbidden: User "system:serviceaccount:ci:runner" cannot get resource "deployments" in API group "apps" in the namespace "prod\"""")
p("kubectl-webhook-denied-500", "config_error", "kubectl apply -f k8s/",
"""Error from server (InternalError): error when creating "k8s/deploy.yaml": Internal error occurred: failed calling webhook "validate.kyverno.svc-fail": admission webhook "validate.kyverno.svc-fail" denied the request: policy require-labels: validation error: label 'team' is required""")
p("kubectl-pod-evicted-in-app-log", "build_error", "kubectl logs job/migrate",
"""2026-11-24T10:00:01Z INFO  worker: pod web-abc was evicted from node-3, rescheduling job queue
2026-11-24T10:00:02Z ERROR migrate: relation "users" already exists (SQLSTATE 42P07)
Error: migration 0042_add_users failed""")
