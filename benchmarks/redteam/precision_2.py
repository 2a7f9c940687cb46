from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
p("urllib-404-pinned", "config_error", "python tools/fetch_model.py",
"""Downloading https://github.com/acme/models/releases/download/v1.4.0/weights.bin
Traceback (most recent call last):
  File "/builds/g/p/tools/fetch_model.py", line 18, in <module>
    urllib.request.urlretrieve(URL, dest)
  File "/usr/lib/python3.11/urllib/request.py", line 643, in http_error_default
    raise HTTPError(req.full_url, code, msg, hdrs, fp)
urllib.error.HTTPError: HTTP Error 404: Not Found""")
p("curl22-404", "config_error", "curl -fsSLO https://releases.hashicorp.com/terraform/1.99.0/terraform_1.99.0_linux_amd64.zip",
"""curl: (22) The requested URL returned error: 404""")
p("wget-404", "config_error", "wget -q https://downloads.example.org/tool-3.2.1.tar.gz",
"""--2026-11-24 10:00:01--  https://downloads.example.org/tool-3.2.1.tar.gz
Resolving downloads.example.org (downloads.example.org)... 93.184.216.34
Connecting to downloads.example.org (downloads.example.org)|93.184.216.34|:443... connected.
HTTP request sent, awaiting response... 404 Not Found
2026-11-24 10:00:01 ERROR 404: Not Found.""", 8)
p("apt-stale-404", "config_error", "apt-get install -y libssl1.1",
"""Reading package lists...
Building dependency tree...
The following NEW packages will be installed:
  libssl1.1
Err:1 http://deb.debian.org/debian bullseye/main amd64 libssl1.1 amd64 1.1.1n-0+deb11u3
  404  Not Found [IP: 151.101.2.132 80]
E: Failed to fetch http://deb.debian.org/debian/pool/main/o/openssl/libssl1.1_1.1.1n-0+deb11u3_amd64.deb  404  Not Found [IP: 151.101.2.132 80]
E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?""", 100)
p("apt-typo", "config_error", "apt-get install -y build-essentail",
"""Reading package lists...
Building dependency tree...
Reading state information...
E: Unable to locate package build-essentail""", 100)
p("dnf-typo", "config_error", "dnf install -y pyhton3-devel",
"""Last metadata expiration check: 0:00:03 ago on Tue Nov 24 10:00:00 2026.
No match for argument: pyhton3-devel
Error: Unable to find a match: pyhton3-devel""")
p("pip-typo", "config_error", "pip install reqeusts==2.31.0",
"""ERROR: Could not find a version that satisfies the requirement reqeusts==2.31.0 (from versions: none)
ERROR: No matching distribution found for reqeusts==2.31.0""")
p("pip-version-yanked-py", "config_error", "pip install numpy==1.19.5",
"""ERROR: Ignored the following versions that require a different python version: 1.19.5 Requires-Python >=3.6,<3.10
ERROR: Could not find a version that satisfies the requirement numpy==1.19.5 (from versions: 1.21.2, 1.21.3, 1.26.4)
ERROR: No matching distribution found for numpy==1.19.5""")
p("npm-e404-typo", "config_error", "npm ci",
"""npm ERR! code E404
npm ERR! 404 Not Found - GET https://registry.npmjs.org/lodahs - Not found
npm ERR! 404
npm ERR! 404  'lodahs@^4.17.21' is not in this registry.""")
p("maven-401-transfer", "config_error", "mvn -B deploy",
"""[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy (default-deploy) on project app: Failed to deploy artifacts: Could not transfer artifact com.acme:app:jar:1.2.0 from/to gitlab-maven (https://gitlab.example.com/api/v4/projects/12/packages/maven): status code: 401, reason phrase: Unauthorized (401) -> [Help 1]""")
p("maven-pkix", "config_error", "mvn -B package",
"""[ERROR] Failed to execute goal on project app: Could not resolve dependencies for project com.acme:app:jar:1.0: Failed to collect dependencies at com.acme:lib:jar:2.0: Failed to read artifact descriptor for com.acme:lib:jar:2.0: Could not transfer artifact com.acme:lib:pom:2.0 from/to internal (https://nexus.corp.local/repository/maven/): PKIX path building failed: sun.security.provider.certpath.SunCertPathBuilderException: unable to find valid certification path to requested target -> [Help 1]""")
p("gradle-could-not-get-404", "config_error", "./gradlew build",
"""FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':app:compileJava'.
> Could not resolve all files for configuration ':app:compileClasspath'.
   > Could not resolve com.acme:lib:2.0.0.
     Required by:
         project :app
      > Could not resolve com.acme:lib:2.0.0.
         > Could not get resource 'https://repo.acme.io/releases/com/acme/lib/2.0.0/lib-2.0.0.pom'.
            > Could not GET 'https://repo.acme.io/releases/com/acme/lib/2.0.0/lib-2.0.0.pom'. Received status code 403 from server: Forbidden

BUILD FAILED in 4s""")
p("go-mod-unknown-revision", "config_error", "go build ./...",
"""go: github.com/acme/lib@v1.9.9: reading github.com/acme/lib/go.mod at revision v1.9.9: unknown revision v1.9.9""")
p("cargo-no-matching", "config_error", "cargo build --locked",
"""    Updating crates.io index
error: failed to select a version for the requirement `serde = "^9.0"`
candidate versions found which didn't match: 1.0.193, 1.0.192, 1.0.191, ...
location searched: crates.io index
required by package `app v0.1.0 (/builds/g/p)`""", 101)
p("spack-html-404", "config_error", "spack install zlib@9.9",
"""==> Fetching https://zlib.net/zlib-9.9.tar.gz
==> Error: FetchError: All fetchers failed for zlib-9.9-abcdef
==> Warning: The contents of /tmp/spack-stage/zlib-9.9.tar.gz look like HTML. Either the URL you are trying to use does not exist or you have an internet gateway issue. You can remove the bad archive using 'spack clean <package>', then try again using the correct URL.""")
p("pip-hash-mismatch-pin", "build_error", "pip install --require-hashes -r requirements.txt",
"""ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
    requests==2.31.0 from https://files.pythonhosted.org/packages/70/8e/requests-2.31.0-py3-none-any.whl:
        Expected sha256 0000000000000000000000000000000000000000000000000000000000000000
             Got        58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f""")
p("git-ref-not-a-tree", "config_error", "git checkout 3f2a9c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3",
"""fatal: reference is not a tree: 3f2a9c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3""", 128)
p("git-submodule-not-tree", "config_error", "git submodule update --init",
"""Cloning into '/builds/g/p/vendor/lib'...
fatal: remote error: upload-pack: not our ref 9c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3f2a
fatal: Fetched in submodule path 'vendor/lib', but it did not contain 9c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3f2a. Direct fetching of that commit failed.""", 128)
p("git-clone-typo-repo", "config_error", "git clone https://gitlab.example.com/group/missing-repo.git",
"""Cloning into 'missing-repo'...
remote: The project you were looking for could not be found or you don't have permission to view it.
fatal: repository 'https://gitlab.example.com/group/missing-repo.git/' not found""", 128)
p("git-pathspec-branch", "config_error", "git checkout release/9.9",
"""error: pathspec 'release/9.9' did not match any file(s) known to git""")
p("git-remote-ref-missing", "config_error", "git fetch origin feature/nonexistent",
"""fatal: couldn't find remote ref feature/nonexistent""", 128)
