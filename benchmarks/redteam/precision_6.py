from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
GS = 'section_start:1700000000:get_sources\r\x1b[0KGetting source from Git repository\n'
P.append(("gs-submodule-url-missing", "config_error", GS + """Fetching changes with git depth set to 20...
Updating/initializing submodules recursively with git depth set to 20...
fatal: No url found for submodule path 'third_party/lib' in .gitmodules
section_end:1700000003:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
"""))
P.append(("gs-lfs-object-missing", "config_error", GS + """Fetching changes with git depth set to 20...
Checking out 1a2b3c4d as detached HEAD (ref is main)...
Downloading assets/model.bin (120 MB)
Error downloading object: assets/model.bin (5f1c2a3): Smudge error: Error downloading assets/model.bin (5f1c2a3b...): [5f1c2a3b...] Object does not exist on the server: [404] Object does not exist on the server
error: external filter 'git-lfs filter-process' failed
fatal: assets/model.bin: smudge filter lfs failed
section_end:1700000003:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
"""))
P.append(("k8s-job-image-tag-typo", "config_error", """Using Kubernetes executor with image node:22-alpne ...
Waiting for pod gitlab/runner-abc-project-1-concurrent-0-xyz to be running, status is Pending
	ContainersNotReady: "containers with unready status: [build helper]"
ERROR: Job failed (system failure): prepare environment: waiting for pod running: pulling image "node:22-alpne": image pull failed: rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/node:22-alpne": failed to resolve reference "docker.io/library/node:22-alpne": docker.io/library/node:22-alpne: not found. Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information
"""))
p("pg-service-no-password", "config_error", "pytest -q",
"""*** WARNING: Service runner-abc-project-1-concurrent-0-postgres-0 probably didn't start properly.
Health check error:
service "runner-abc-project-1-concurrent-0-postgres-0-wait-for-service" timeout
Service container logs:
2026-11-24T10:00:00.1Z Error: Database is uninitialized and superuser password is not specified.
2026-11-24T10:00:00.1Z        You must specify POSTGRES_PASSWORD to a non-empty value for the
2026-11-24T10:00:00.1Z        superuser.
*********
E   psycopg2.OperationalError: connection to server at "postgres" (10.1.2.3), port 5432 failed: Connection refused
E   	Is the server running on that host and accepting TCP/IP connections?
=========================== short test summary info ============================
ERROR tests/test_db.py::test_insert - psycopg2.OperationalError: connection to server at "postgres" (10.1.2.3), port 5432 failed: Connection refused
1 error in 0.41s""")
p("redis-service-undeclared", "config_error", "node scripts/warm-cache.js",
"""Error: getaddrinfo ENOTFOUND redis
    at GetAddrInfoReqWrap.onlookup [as oncomplete] (node:dns:107:26) {
  errno: -3008,
  code: 'ENOTFOUND',
  syscall: 'getaddrinfo',
  hostname: 'redis'
}""")
p("curl22-422-release-exists", "config_error", "curl --fail -X POST -H \"JOB-TOKEN: $CI_JOB_TOKEN\" \"$CI_API_V4_URL/projects/$CI_PROJECT_ID/releases\" -d tag_name=v1.2.0",
"""curl: (22) The requested URL returned error: 422""")
p("curl22-410", "config_error", "curl -fsSLO https://dl.example.com/old/tool-1.0.tgz",
"""curl: (22) The requested URL returned error: 410""")
p("git-push-pack-too-large", "config_error", "git push origin HEAD:main",
"""Enumerating objects: 2034, done.
Writing objects: 100% (2034/2034), 1.10 GiB | 40.00 MiB/s, done.
error: RPC failed; HTTP 413 curl 22 The requested URL returned error: 413
send-pack: unexpected disconnect while reading sideband packet
fatal: the remote end hung up unexpectedly
Everything up-to-date""", 1)
p("requests-ssl-wrong-version", "config_error", "python deploy.py",
"""requests.exceptions.SSLError: HTTPSConnectionPool(host='api.internal.example', port=80): Max retries exceeded with url: /v1/deploy (Caused by SSLError(SSLError(1, '[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)')))""")
p("curl35-wrong-version", "config_error", "curl -sS https://api.internal.example:8080/health",
"""curl: (35) error:0A00010B:SSL routines::wrong version number""")
p("terraform-provider-typo", "config_error", "terraform init",
"""Initializing provider plugins...
- Finding latest version of hashicorp/awz...
╷
│ Error: Failed to query available provider packages
│
│ Could not retrieve the list of available versions for provider hashicorp/awz: provider registry registry.terraform.io does not have a provider named registry.terraform.io/hashicorp/awz
╵""")
p("gitlab-api-404-project", "config_error", "python tools/release.py",
"""gitlab.exceptions.GitlabGetError: 404: 404 Project Not Found""")
p("npm-e404-scoped-private", "config_error", "npm ci",
"""npm ERR! code E404
npm ERR! 404 Not Found - GET https://registry.npmjs.org/@acme%2finternal-ui - Not found""")
p("helm-repo-404-chart", "config_error", "helm dependency build ./chart",
"""Error: Chart.yaml file is missing / could not download https://charts.example.com/acme-1.9.9.tgz: failed to fetch https://charts.example.com/acme-1.9.9.tgz : 404 Not Found""")
p("docker-pull-manifest-unknown-script", "config_error", "docker pull registry.example.com/team/app:1.2.3-rc",
"""Error response from daemon: manifest for registry.example.com/team/app:1.2.3-rc not found: manifest unknown: manifest unknown""")
p("go-test-i-o-timeout-local", "build_error", "./scripts/itest.sh",
"""itest: dial tcp 127.0.0.1:9000: i/o timeout (minio started with --address :9001 in docker-compose.ci.yml)
itest: FAIL""")
# reverse: real transient / OOM that must be acted on
p("R-go-mod-conn-reset", "infrastructure", "go mod download",
"""go: github.com/x/y@v1.2.3: Get "https://proxy.golang.org/github.com/x/y/@v/v1.2.3.mod": read tcp 10.1.2.3:51234->142.250.1.1:443: read: connection reset by peer""")
p("R-xdist-worker-crash", "oom", "pytest -n 4",
"""[gw2] node down: Not properly terminated
F
replacing crashed worker gw2
=========================== short test summary info ============================
FAILED tests/test_big.py::test_matrix_product - worker 'gw2' crashed while running 'tests/test_big.py::test_matrix_product'
1 failed, 200 passed in 310.2s""")
p("R-surefire-137", "oom", "mvn -B verify",
"""[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.2:test (default-test) on project core: There are test failures.
[ERROR] The forked VM terminated without properly saying goodbye. VM crash or System.exit called?
[ERROR] Command was /bin/sh -c cd /builds/g/p/core && /opt/java/bin/java -jar /builds/g/p/core/target/surefire/surefirebooter.jar
[ERROR] Error occurred in starting fork, check output in log
[ERROR] Process Exit Code: 137""")
p("R-webpack-killed", "oom", "npm run build",
"""> app@1.0.0 build
> webpack --mode production

<s> [webpack.Progress] 68% building 1200/1403 modules
Killed""", 137)
p("R-gradle-daemon-disappeared", "oom", "./gradlew assemble",
"""> Task :app:compileKotlin
Gradle build daemon disappeared unexpectedly (it may have been killed or may have crashed)""")
p("R-apt-mirror-sync", "infrastructure", "apt-get update",
"""E: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy-updates/main/binary-amd64/by-hash/SHA256/abcd  File has unexpected size (12345 != 12346). Mirror sync in progress? [IP: 91.189.91.83 80]
E: Some index files failed to download. They have been ignored, or old ones used instead.""", 100)
p("R-docker-hub-5xx", "infrastructure", "docker pull python:3.12",
"""Error response from daemon: received unexpected HTTP status: 503 Service Unavailable""")
p("R-rustc-sigkill-cargo", "oom", "cargo build --release",
"""   Compiling big-crate v0.1.0 (/builds/g/p)
error: could not compile `big-crate` (lib)

Caused by:
  process didn't exit successfully: `rustc --crate-name big_crate ...` (signal: 9, SIGKILL: kill)""", 101)
p("R-git-fetch-early-eof", "infrastructure", "git fetch --unshallow",
"""remote: Enumerating objects: 50000, done.
error: RPC failed; curl 18 transfer closed with outstanding read data remaining
fetch-pack: unexpected disconnect while reading sideband packet
fatal: early EOF
fatal: fetch-pack: invalid index-pack output""", 128)
