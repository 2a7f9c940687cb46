"""Recall probes (eleventh pass): transient infrastructure failures and OOM kills written from the
tools' own output formats, plus traps that must stay right. Same style as p1.py."""
from . import SS, job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
def raw(pid, want, text, code=None, fr="script_failure"): P.append((pid, want, text, code, fr))
I, O = "infrastructure", "oom"

# ---------------- transient: package managers ----------------
p("pip-read-timeout", I, "pip install -r requirements.txt", """Collecting numpy==1.26.4
  Downloading numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl (18.3 MB)
     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 4.1/18.3 MB 1.2 MB/s eta 0:00:12
ERROR: Exception:
Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/pip/_vendor/urllib3/response.py", line 438, in _error_catcher
    yield
  File "/usr/local/lib/python3.11/site-packages/pip/_vendor/urllib3/response.py", line 561, in read
    data = self._fp_read(amt) if not fp_closed else b""
TimeoutError: The read operation timed out

During handling of the above exception, another exception occurred:
pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out.""", 2)
p("pip-503-index", I, "pip install -r requirements.txt", """WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProtocolError('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))': /simple/requests/
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProtocolError('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))': /simple/requests/
ERROR: Could not find a version that satisfies the requirement requests==2.31.0 (from versions: none)
ERROR: No matching distribution found for requests==2.31.0""", 1)
p("pip-hash-incomplete", I, "pip install --require-hashes -r req.txt", """Collecting torch==2.1.0
  Downloading torch-2.1.0-cp311-cp311-manylinux1_x86_64.whl (670.2 MB)
ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
    torch==2.1.0 from https://files.pythonhosted.org/packages/torch-2.1.0.whl:
        Expected sha256 0d4d8c...
             Got        9b1c2e...
ERROR: Exception: IncompleteRead(41943040 bytes read, 660000000 more expected)""", 1)
p("poetry-connection-error", I, "poetry install --no-root", """Installing dependencies from lock file

Package operations: 84 installs, 0 updates, 0 removals

  - Installing certifi (2024.2.2)
  - Installing charset-normalizer (3.3.2)

  ConnectionError

  HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Max retries exceeded with url: /packages/63/09/charset_normalizer-3.3.2.tar.gz (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno 101] Network is unreachable'))

  at /usr/local/lib/python3.11/site-packages/requests/adapters.py:519 in send""", 1)
p("uv-502", I, "uv sync --frozen", """Resolved 112 packages in 3ms
error: Failed to download `pydantic-core==2.16.3`
  Caused by: Failed to fetch: `https://files.pythonhosted.org/packages/pydantic_core-2.16.3-cp311-manylinux_2_17_x86_64.whl`
  Caused by: HTTP status server error (502 Bad Gateway) for url (https://files.pythonhosted.org/packages/pydantic_core-2.16.3-cp311-manylinux_2_17_x86_64.whl)""", 2)
p("uv-stream-error", I, "uv pip install -r requirements.txt", """error: Failed to download distributions
  Caused by: Failed to fetch wheel: scipy==1.12.0
  Caused by: Request failed after 3 retries
  Caused by: error decoding response body
  Caused by: request or response body error
  Caused by: operation timed out""", 2)
p("conda-http-000", I, "conda env create -f environment.yml", """Collecting package metadata (repodata.json): failed

CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://conda.anaconda.org/conda-forge/linux-64/repodata.json>
Elapsed: -

An HTTP error occurred when trying to retrieve this URL.
HTTP errors are often intermittent, and a simple retry will get you on your way.
'https://conda.anaconda.org/conda-forge/linux-64'""", 1)
p("mamba-download-fail", I, "micromamba create -y -f env.yml", """conda-forge/linux-64                                         ??.?MB @  ??.?MB/s  0 failed  30.0s
error    libmamba Multi-download failed. Reason: Transfer finalized, status: 503 [https://conda.anaconda.org/conda-forge/linux-64/repodata.json.zst] 1234 bytes
critical libmamba Multiple errors occurred:
    Transfer finalized, status: 503 [https://conda.anaconda.org/conda-forge/linux-64/repodata.json.zst] 1234 bytes""", 1)
p("npm-econnreset", I, "npm ci", """npm WARN deprecated inflight@1.0.6: This module is not supported
npm ERR! code ECONNRESET
npm ERR! syscall read
npm ERR! errno ECONNRESET
npm ERR! network request to https://registry.npmjs.org/@babel%2fcore failed, reason: read ECONNRESET
npm ERR! network This is a problem related to network connectivity.
npm ERR! network In most cases you are behind a proxy or have bad network settings.

npm ERR! A complete log of this run can be found in: /root/.npm/_logs/2026-11-24T10_00_00_000Z-debug-0.log""", 1)
p("npm-etarget-503", I, "npm ci", """npm ERR! code E503
npm ERR! 503 Service Unavailable - GET https://registry.npmjs.org/typescript/-/typescript-5.3.3.tgz""", 1)
p("npm10-eai-again", I, "npm ci", """npm error code EAI_AGAIN
npm error syscall getaddrinfo
npm error errno EAI_AGAIN
npm error request to https://registry.npmjs.org/react failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org""", 1)
p("yarn1-esockettimedout", I, "yarn install --frozen-lockfile", """[1/4] Resolving packages...
[2/4] Fetching packages...
info There appears to be trouble with your network connection. Retrying...
info There appears to be trouble with your network connection. Retrying...
error An unexpected error occurred: "https://registry.yarnpkg.com/webpack/-/webpack-5.90.0.tgz: ESOCKETTIMEDOUT".
info If you think this is a bug, please open a bug report with the information provided in "/builds/g/p/yarn-error.log".""", 1)
p("yarn-berry-500", I, "yarn install --immutable", """➤ YN0000: ┌ Fetch step
➤ YN0001: │ RequestError: Response code 500 (Internal Server Error)
    at ClientRequest.<anonymous> (/builds/g/p/.yarn/releases/yarn-4.1.0.cjs:147:14258)
➤ YN0000: └ Completed in 31s 214ms
➤ YN0000: · Failed with errors in 33s 2ms""", 1)
p("pnpm-err-socket-timeout", I, "pnpm install --frozen-lockfile", """Progress: resolved 812, reused 790, downloaded 3, added 0
 WARN  GET https://registry.npmjs.org/esbuild/-/esbuild-0.20.1.tgz error (ERR_SOCKET_TIMEOUT). Will retry in 10 seconds. 2 retries left.
 ERR_PNPM_META_FETCH_FAIL  GET https://registry.npmjs.org/esbuild: request to https://registry.npmjs.org/esbuild failed, reason: socket hang up""", 1)
p("pnpm-tarball-integrity-partial", I, "pnpm install", """ ERR_PNPM_TARBALL_EXTRACT  Failed to add tarball from "https://registry.npmjs.org/typescript/-/typescript-5.4.2.tgz" to store: Invalid checksum for TAR header at offset 0. Expected 0, got NaN""", 1)
p("cargo-spurious", I, "cargo build --release --locked", """    Updating crates.io index
warning: spurious network error (3 tries remaining): [28] Timeout was reached (failed to download from `https://static.crates.io/crates/syn/2.0.48/download`)
warning: spurious network error (2 tries remaining): [28] Timeout was reached
warning: spurious network error (1 tries remaining): [28] Timeout was reached
error: failed to download from `https://static.crates.io/crates/syn/2.0.48/download`

Caused by:
  [28] Timeout was reached (Operation timed out after 30000 milliseconds with 1234 out of 250000 bytes received)""", 101)
p("cargo-index-503", I, "cargo fetch", """    Updating crates.io index
error: failed to get `serde` as a dependency of package `app v0.1.0 (/builds/g/app)`

Caused by:
  failed to query replaced source registry `crates-io`

Caused by:
  download of se/rd/serde failed

Caused by:
  failed to get successful HTTP response from `https://index.crates.io/se/rd/serde` (18.154.0.1), got 503
  body:
  <html><body>Service Unavailable</body></html>""", 101)
p("go-mod-proxy-502", I, "go mod download", """go: github.com/stretchr/testify@v1.8.4: reading https://proxy.golang.org/github.com/stretchr/testify/@v/v1.8.4.zip: 502 Bad Gateway""", 1)
p("go-mod-tls-timeout", I, "go build ./...", """go: downloading golang.org/x/sys v0.17.0
go: golang.org/x/sys@v0.17.0: Get "https://proxy.golang.org/golang.org/x/sys/@v/v0.17.0.zip": net/http: TLS handshake timeout""", 1)
p("go-sumdb-io-timeout", I, "go mod download", """verifying golang.org/x/net@v0.21.0: golang.org/x/net@v0.21.0: Get "https://sum.golang.org/lookup/golang.org/x/net@v0.21.0": dial tcp 142.250.74.17:443: i/o timeout""", 1)
p("maven-transfer-reset", I, "mvn -B package", """[ERROR] Failed to execute goal on project app: Could not resolve dependencies for project com.acme:app:jar:1.0: Failed to collect dependencies at org.springframework.boot:spring-boot-starter-web:jar:3.2.2: Failed to read artifact descriptor for org.springframework.boot:spring-boot-starter-web:jar:3.2.2: The following artifacts could not be resolved: org.springframework.boot:spring-boot-starter-web:pom:3.2.2 (absent): Could not transfer artifact org.springframework.boot:spring-boot-starter-web:pom:3.2.2 from/to central (https://repo.maven.apache.org/maven2): Connection reset -> [Help 1]""", 1)
p("maven-status-502", I, "mvn -B verify", """[ERROR] Failed to execute goal on project core: Could not resolve dependencies for project org.acme:core:jar:2.1-SNAPSHOT: Could not transfer artifact com.google.guava:guava:jar:33.0.0-jre from/to central (https://repo.maven.apache.org/maven2): status code: 502, reason phrase: Bad Gateway (502) -> [Help 1]""", 1)
p("maven-wagon-read-timeout", I, "mvn -B -s ci_settings.xml deploy", """[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy (default-deploy) on project api: Failed to deploy artifacts: Could not transfer artifact com.acme:api:jar:1.4.2 from/to gitlab-maven (https://gitlab.example.com/api/v4/projects/12/packages/maven): Read timed out -> [Help 1]""", 1)
p("gradle-could-not-get-resource", I, "./gradlew build", """FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':app:compileKotlin'.
> Could not resolve all files for configuration ':app:compileClasspath'.
   > Could not download kotlin-stdlib-1.9.22.jar (org.jetbrains.kotlin:kotlin-stdlib:1.9.22)
      > Could not get resource 'https://repo.maven.apache.org/maven2/org/jetbrains/kotlin/kotlin-stdlib/1.9.22/kotlin-stdlib-1.9.22.jar'.
         > Premature end of Content-Length delimited message body (expected: 1,718,956; received: 524,288)""", 1)
p("gradle-wrapper-download-timeout", I, "./gradlew assemble", """Downloading https://services.gradle.org/distributions/gradle-8.5-bin.zip
Exception in thread "main" java.net.SocketTimeoutException: Read timed out
	at java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:288)
	at org.gradle.wrapper.Download.downloadInternal(Download.java:111)
	at org.gradle.wrapper.WrapperExecutor.execute(WrapperExecutor.java:178)
	at org.gradle.wrapper.GradleWrapperMain.main(GradleWrapperMain.java:66)""", 1)
p("gradle-received-status-503", I, "./gradlew test", """* What went wrong:
Execution failed for task ':lib:compileJava'.
> Could not resolve all files for configuration ':lib:compileClasspath'.
   > Could not resolve com.squareup.okhttp3:okhttp:4.12.0.
     Required by:
         project :lib
      > Could not resolve com.squareup.okhttp3:okhttp:4.12.0.
         > Could not get resource 'https://plugins.gradle.org/m2/com/squareup/okhttp3/okhttp/4.12.0/okhttp-4.12.0.pom'.
            > Could not GET 'https://plugins.gradle.org/m2/com/squareup/okhttp3/okhttp/4.12.0/okhttp-4.12.0.pom'. Received status code 503 from server: Service Unavailable""", 1)
p("sbt-server-access-error", I, "sbt test", """[error] lmcoursier.internal.shaded.coursier.error.FetchError$DownloadingArtifacts: Error fetching artifacts:
[error] https://repo1.maven.org/maven2/org/scala-lang/scala3-library_3/3.3.1/scala3-library_3-3.3.1.jar: download error: Caught java.net.SocketTimeoutException (Read timed out) while downloading https://repo1.maven.org/maven2/org/scala-lang/scala3-library_3/3.3.1/scala3-library_3-3.3.1.jar
[error] (update) lmcoursier.internal.shaded.coursier.error.FetchError$DownloadingArtifacts: Error fetching artifacts:""", 1)
p("nuget-nu1301", I, "dotnet restore", """  Determining projects to restore...
/usr/share/dotnet/sdk/8.0.101/NuGet.targets(156,5): error : Unable to load the service index for source https://api.nuget.org/v3/index.json. [/builds/g/app/App.sln]
/usr/share/dotnet/sdk/8.0.101/NuGet.targets(156,5): error :   The SSL connection could not be established, see inner exception. [/builds/g/app/App.sln]
/usr/share/dotnet/sdk/8.0.101/NuGet.targets(156,5): error :   Unable to read data from the transport connection: Connection reset by peer. [/builds/g/app/App.sln]""", 1)
p("nuget-nu1301-code", I, "dotnet restore", """/builds/g/app/src/Api/Api.csproj : error NU1301: Failed to retrieve information about 'Serilog' from remote source 'https://api.nuget.org/v3-flatcontainer/serilog/index.json'.
/builds/g/app/src/Api/Api.csproj : error NU1301:   Response status code does not indicate success: 503 (Service Unavailable).""", 1)
p("composer-curl-28", I, "composer install --no-interaction", """Installing dependencies from lock file (including require-dev)
Package operations: 92 installs, 0 updates, 0 removals
  - Downloading symfony/console (v6.4.3)
    Failed downloading symfony/console, trying the next URL (28: Operation timed out after 300003 milliseconds with 0 bytes received)

In CurlDownloader.php line 390:

  curl error 28 while downloading https://api.github.com/repos/symfony/console/zipball/abc: Operation timed out after 300003 milliseconds with 0 bytes received""", 1)
p("composer-transport-502", I, "composer install", """In CurlDownloader.php line 626:

  The "https://repo.packagist.org/p2/laravel/framework.json" file could not be downloaded (HTTP/2 502 )""", 1)
p("bundler-gem-fetch", I, "bundle install --jobs 4", """Fetching gem metadata from https://rubygems.org/.......
Retrying download gem from https://rubygems.org/ due to error (2/4): Gem::Net::OpenTimeout Failed to open TCP connection to rubygems.org:443 (execution expired)
Retrying download gem from https://rubygems.org/ due to error (3/4): Gem::Net::OpenTimeout Failed to open TCP connection to rubygems.org:443 (execution expired)
Retrying download gem from https://rubygems.org/ due to error (4/4): Gem::Net::OpenTimeout Failed to open TCP connection to rubygems.org:443 (execution expired)
Gem::Net::OpenTimeout: Failed to open TCP connection to rubygems.org:443 (execution expired)""", 5)
p("bundler-http-error", I, "bundle install", """Fetching source index from https://rubygems.org/

Retrying fetcher due to error (2/4): Bundler::HTTPError Could not fetch specs from https://rubygems.org/ due to underlying error <bad response Service Unavailable 503 (https://rubygems.org/specs.4.8.gz)>
Could not fetch specs from https://rubygems.org/ due to underlying error <bad response Service Unavailable 503 (https://rubygems.org/specs.4.8.gz)>""", 17)
p("gem-install-socket", I, "gem install bundler -v 2.5.6", """ERROR:  Could not find a valid gem 'bundler' (= 2.5.6), here is why:
          Unable to download data from https://rubygems.org/ - Net::OpenTimeout: Failed to open TCP connection to rubygems.org:443 (execution expired) (https://rubygems.org/specs.4.8.gz)""", 2)
p("cpanm-fetch-fail", I, "cpanm --installdeps .", """--> Working on Moose
Fetching http://www.cpan.org/authors/id/E/ET/ETHER/Moose-2.2206.tar.gz ... FAIL
! Download http://www.cpan.org/authors/id/E/ET/ETHER/Moose-2.2206.tar.gz failed. Retrying ...
! Download http://www.cpan.org/authors/id/E/ET/ETHER/Moose-2.2206.tar.gz failed. Retrying ...
! Failed to download http://www.cpan.org/authors/id/E/ET/ETHER/Moose-2.2206.tar.gz
! Couldn't find module or a distribution Moose""", 1)
p("r-cran-cannot-open-url", I, "Rscript -e 'install.packages(\"data.table\")'", """trying URL 'https://cloud.r-project.org/src/contrib/data.table_1.15.0.tar.gz'
Warning in download.file(url, destfile, method, mode = "wb", ...) :
  URL 'https://cloud.r-project.org/src/contrib/data.table_1.15.0.tar.gz': Timeout of 60 seconds was reached
Error in download.file(url, destfile, method, mode = "wb", ...) :
  download from 'https://cloud.r-project.org/src/contrib/data.table_1.15.0.tar.gz' failed
Warning in download.packages(pkgs, destdir = tmpd, available = available,  :
  download of package 'data.table' failed
Execution halted""", 1)
p("r-pak-http-503", I, "Rscript -e 'pak::pkg_install(\"tidyverse\")'", """✖ Failed to download dplyr 1.1.4 (source)
Error: 
! error in pak subprocess
Caused by error: 
! Could not solve package dependencies:
* tidyverse: Can't install dependency dplyr
* dplyr: ! Failed to download dplyr from `https://cloud.r-project.org/src/contrib/dplyr_1.1.4.tar.gz`.
  Caused by error in `(function (res) ...`:
  ! HTTP error 503.
Execution halted""", 1)
p("apt-hash-sum-mismatch", I, "apt-get update && apt-get install -y build-essential", """Get:5 http://deb.debian.org/debian bookworm/main amd64 Packages [8786 kB]
Err:5 http://deb.debian.org/debian bookworm/main amd64 Packages
  Hash Sum mismatch
  Hashes of expected file:
   - Filesize:8786160 [weak]
   - SHA256:0b7f7d... 
  Hashes of received file:
   - SHA256:1f3c9a...
   - Filesize:8786160 [weak]
  Last modification reported: Sat, 10 Feb 2024 10:00:00 +0000
Fetched 8987 kB in 2s (4493 kB/s)
Reading package lists...
E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/0b7f7d  Hash Sum mismatch
E: Some index files failed to download. They have been ignored, or old ones used instead.""", 100)
p("apt-temp-resolve", I, "apt-get update", """Err:1 http://archive.ubuntu.com/ubuntu jammy InRelease
  Temporary failure resolving 'archive.ubuntu.com'
Err:2 http://security.ubuntu.com/ubuntu jammy-security InRelease
  Temporary failure resolving 'security.ubuntu.com'
Reading package lists...
W: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease  Temporary failure resolving 'archive.ubuntu.com'
W: Some index files failed to download. They have been ignored, or old ones used instead.
E: Unable to locate package libpq-dev""", 100)
p("apt-503-fetch", I, "apt-get install -y libssl-dev", """Err:7 http://deb.debian.org/debian bookworm/main amd64 libssl-dev amd64 3.0.11-1~deb12u2
  503  Service Unavailable [IP: 151.101.2.132 80]
E: Failed to fetch http://deb.debian.org/debian/pool/main/o/openssl/libssl-dev_3.0.11-1~deb12u2_amd64.deb  503  Service Unavailable [IP: 151.101.2.132 80]
E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?""", 100)
p("dnf-curl-timeout", I, "dnf install -y gcc-c++", """Fedora 39 - x86_64 - Updates                    0.0  B/s |   0  B     00:30
Errors during downloading metadata for repository 'updates':
  - Curl error (28): Timeout was reached for https://mirrors.fedoraproject.org/metalink?repo=updates-released-f39&arch=x86_64 [Operation too slow. Less than 1000 bytes/sec transferred the last 30 seconds]
Error: Failed to download metadata for repo 'updates': Cannot prepare internal mirrorlist: Curl error (28): Timeout was reached for https://mirrors.fedoraproject.org/metalink?repo=updates-released-f39&arch=x86_64""", 1)
p("yum-no-more-mirrors", I, "yum install -y make", """http://mirror.centos.org/centos/7/os/x86_64/Packages/make-3.82-24.el7.x86_64.rpm: [Errno 14] curl#56 - "Recv failure: Connection reset by peer"
Trying other mirror.


Error downloading packages:
  1:make-3.82-24.el7.x86_64: [Errno 256] No more mirrors to try.""", 1)
p("zypper-download-fail", I, "zypper --non-interactive install gcc", """Retrieving: gcc13-13.2.1+git7813-1.10.x86_64 (Main Repository (OSS)) (12/40), 18.5 MiB
Download (curl) error for 'https://download.opensuse.org/tumbleweed/repo/oss/x86_64/gcc13-13.2.1+git7813-1.10.x86_64.rpm':
Error code: Curl error 56
Error message: Recv failure: Connection reset by peer

Abort, retry, ignore? [a/r/i/...? shows all options] (a): a
Problem occurred during or after installation or removal of packages:
Installation has been aborted as directed.""", 8)
p("apk-temporary-error", I, "apk add --no-cache git openssh", """fetch https://dl-cdn.alpinelinux.org/alpine/v3.19/main/x86_64/APKINDEX.tar.gz
WARNING: fetching https://dl-cdn.alpinelinux.org/alpine/v3.19/main: temporary error (try again later)
fetch https://dl-cdn.alpinelinux.org/alpine/v3.19/community/x86_64/APKINDEX.tar.gz
WARNING: fetching https://dl-cdn.alpinelinux.org/alpine/v3.19/community: temporary error (try again later)
ERROR: unable to select packages:
  git (no such package):
    required by: world[git]
  openssh (no such package):
    required by: world[openssh]""", 2)
p("apk-network-error", I, "apk add curl", """fetch https://dl-cdn.alpinelinux.org/alpine/v3.18/main/x86_64/APKINDEX.tar.gz
ERROR: https://dl-cdn.alpinelinux.org/alpine/v3.18/main: network error (check Internet connection and firewall)
WARNING: Ignoring https://dl-cdn.alpinelinux.org/alpine/v3.18/main: No such file or directory
ERROR: unable to select packages:
  curl (no such package):
    required by: world[curl]""", 1)
p("pacman-failed-retrieve", I, "pacman -Syu --noconfirm base-devel", """:: Retrieving packages...
error: failed retrieving file 'gcc-13.2.1-5-x86_64.pkg.tar.zst' from geo.mirror.pkgbuild.com : Operation too slow. Less than 1 bytes/sec transferred the last 10 seconds
warning: failed to retrieve some files
error: failed to commit transaction (failed to retrieve some files)
Errors occurred, no packages were upgraded.""", 1)
p("brew-curl-22-502", I, "brew install cmake", """==> Fetching cmake
==> Downloading https://ghcr.io/v2/homebrew/core/cmake/manifests/3.28.3
curl: (22) The requested URL returned error: 502
Error: cmake: Failed to download resource "cmake_bottle_manifest"
Download failed: https://ghcr.io/v2/homebrew/core/cmake/manifests/3.28.3""", 1)
p("spack-fetch-timeout", I, "spack install --fail-fast", """==> Fetching https://mirror.spack.io/_source-cache/archive/3f/3f1e.tar.gz
==> Warning: Failed to fetch https://mirror.spack.io/_source-cache/archive/3f/3f1e.tar.gz
    [Errno 110] Connection timed out
==> Fetching https://ftpmirror.gnu.org/gmp/gmp-6.2.1.tar.bz2
==> Warning: Failed to fetch https://ftpmirror.gnu.org/gmp/gmp-6.2.1.tar.bz2
    <urlopen error [Errno 110] Connection timed out>
==> Error: FetchError: All fetchers failed for gmp-6.2.1-abcdef""", 1)
p("nix-unable-download", I, "nix build .#default", """error: unable to download 'https://cache.nixos.org/nar/1abc.nar.xz': HTTP error 503

       response body:

       <html><body>503 Service Unavailable</body></html>""", 1)
p("nix-curl-timeout", I, "nix develop -c make", """warning: error: unable to download 'https://cache.nixos.org/6x0k.narinfo': Timeout was reached (28); retrying in 283 ms
warning: error: unable to download 'https://cache.nixos.org/6x0k.narinfo': Timeout was reached (28); retrying in 633 ms
error: unable to download 'https://cache.nixos.org/6x0k.narinfo': Timeout was reached (28)""", 1)
p("vcpkg-download-failed", I, "cmake --preset ci", """-- Running vcpkg install
Downloading https://github.com/madler/zlib/archive/v1.3.1.tar.gz
error: Failed to download from mirror set
error: https://github.com/madler/zlib/archive/v1.3.1.tar.gz: failed: status code 502
CMake Error at scripts/cmake/vcpkg_download_distfile.cmake:32 (message):
      Failed to download file with error: 1""", 1)
p("conan-connection", I, "conan install . --build=missing", """ERROR: HTTPSConnectionPool(host='center.conan.io', port=443): Max retries exceeded with url: /v1/ping (Caused by ConnectTimeoutError(<urllib3.connection.HTTPSConnection object at 0x7f>, 'Connection to center.conan.io timed out. (connect timeout=60)'))

Unable to connect to conancenter=https://center.conan.io""", 1)
# ---------------- transient: git / GitLab ----------------
raw("git-fetch-502-get-sources", I, """Running with gitlab-runner 16.8.0 (c72a09b6)
  on shared-runner-3 aBcD1234, system ID: r_xyz
section_start:1700000000:get_sources\r\x1b[0KGetting source from Git repository
Fetching changes with git depth set to 20...
Reinitialized existing Git repository in /builds/group/project/.git/
error: RPC failed; HTTP 502 curl 22 The requested URL returned error: 502
fatal: expected flush after ref listing
section_end:1700000005:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
""")
raw("git-clone-gnutls", I, """section_start:1700000000:get_sources\r\x1b[0KGetting source from Git repository
Cloning repository...
Cloning into '/builds/group/project'...
error: RPC failed; curl 56 GnuTLS recv error (-9): Error decoding the received TLS packet.
error: 4021 bytes of body are still expected
fetch-pack: unexpected disconnect while reading sideband packet
fatal: early EOF
fatal: fetch-pack: invalid index-pack output
section_end:1700000030:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
""")
raw("git-lfs-smudge-503", I, """section_start:1700000000:get_sources\r\x1b[0KGetting source from Git repository
Checking out 4f1a2b3c as detached HEAD (ref is main)...
Downloading assets/model.bin (312 MB)
Error downloading object: assets/model.bin (a1b2c3d): Smudge error: Error downloading assets/model.bin (a1b2c3d4e5): batch response: Fatal error: Server error &{%!!(string=https) %!!(string=) %!!(*url.Userinfo=<nil>) %!!(string=gitlab.example.com)} returned 503

Errors logged to '/builds/group/project/.git/lfs/logs/20261124T100000.log'.
Use `git lfs logs last` to view the log.
error: external filter 'git-lfs filter-process' failed
fatal: assets/model.bin: smudge filter lfs failed
section_end:1700000030:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
""")
raw("git-could-not-resolve", I, """section_start:1700000000:get_sources\r\x1b[0KGetting source from Git repository
Fetching changes with git depth set to 50...
Initialized empty Git repository in /builds/group/project/.git/
Created fresh repository.
fatal: unable to access 'https://gitlab.example.com/group/project.git/': Could not resolve host: gitlab.example.com
section_end:1700000005:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
""")
raw("git-submodule-500", I, """section_start:1700000000:get_sources\r\x1b[0KGetting source from Git repository
Updating/initializing submodules recursively with git depth set to 50...
Submodule 'vendor/proto' (https://gitlab-ci-token:[MASKED]@gitlab.example.com/group/proto.git) registered for path 'vendor/proto'
Cloning into '/builds/group/project/vendor/proto'...
remote: GitLab is not responding
fatal: unable to access 'https://gitlab.example.com/group/proto.git/': The requested URL returned error: 500
fatal: clone of 'https://gitlab-ci-token:[MASKED]@gitlab.example.com/group/proto.git' into submodule path '/builds/group/project/vendor/proto' failed
Failed to clone 'vendor/proto'. Retry scheduled
section_end:1700000030:get_sources\r\x1b[0K
ERROR: Job failed: exit code 1
""")
p("git-script-clone-http2", I, "git clone --depth 1 https://github.com/acme/fixtures.git", """Cloning into 'fixtures'...
error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly: CANCEL (err 8)
error: 2771 bytes of body are still expected
fetch-pack: unexpected disconnect while reading sideband packet
fatal: early EOF
fatal: fetch-pack: invalid index-pack output""", 128)
p("git-ssh-connection-closed", I, "git fetch origin main", """kex_exchange_identification: read: Connection reset by peer
Connection reset by 140.82.121.4 port 22
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists.""", 128)
p("gitlab-api-502-release-cli", I, "release-cli create --name v1.2.3 --tag-name v1.2.3", """time="2026-11-24T10:00:00Z" level=info msg="Creating Release..." cli=release-cli command=create name=v1.2.3 project-id=12 server-url="https://gitlab.example.com" tag-message= tag-name=v1.2.3 version=0.16.0
time="2026-11-24T10:00:30Z" level=fatal msg="run app" cli=release-cli error="failed to create release: API Error Response status_code: 502 message: 502 Bad Gateway" version=0.16.0""", 1)
p("artifact-upload-502", I, "echo done", """done""", 0)
P[-1] = ("artifact-upload-502", I, SS + "\x1b[32;1m$ make dist\x1b[0;m\nbuilt dist/app.tar.gz\nsection_end:1700000100:step_script\r\x1b[0K\nsection_start:1700000100:upload_artifacts_on_success\r\x1b[0KUploading artifacts for successful job\nUploading artifacts...\ndist/: found 3 matching artifact files and directories\nWARNING: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway  id=4242 responseStatus=502 Bad Gateway status=502 token=glcbt-64\nWARNING: Retrying...                                  context=artifacts-uploader error=invalid argument\nWARNING: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway  id=4242 responseStatus=502 Bad Gateway status=502 token=glcbt-64\nFATAL: invalid argument\nsection_end:1700000200:upload_artifacts_on_success\r\x1b[0K\nERROR: Job failed: exit code 1\n")
raw("artifact-download-dependency-503", I, """section_start:1700000000:download_artifacts\r\x1b[0KDownloading artifacts
Downloading artifacts for build:linux (4241)...
WARNING: Downloading artifacts from coordinator... error  error=couldn't execute GET against https://gitlab.example.com/api/v4/jobs/4241/artifacts?direct_download=true: Get "https://storage.example.com/artifacts/...": dial tcp 10.0.0.5:443: connect: connection refused id=4241 responseStatus=500 Internal Server Error status=500 token=glcbt-64
WARNING: Retrying...                                error=invalid argument
FATAL: invalid argument
section_end:1700000030:download_artifacts\r\x1b[0K
ERROR: Job failed: exit code 1
""")
raw("cache-s3-download-500", I, """section_start:1700000000:restore_cache\r\x1b[0KRestoring cache
Checking cache for node-modules-protected...
Downloading cache from https://runner-cache.s3.amazonaws.com/project/12/node-modules-protected  ETag="abc"
WARNING: Retrying...                                error=received: 500 Internal Server Error
WARNING: Retrying...                                error=received: 500 Internal Server Error
FATAL: received: 500 Internal Server Error
Failed to extract cache
section_end:1700000030:restore_cache\r\x1b[0K
section_start:1700000030:step_script\r\x1b[0KExecuting "step_script" stage of the job script
\x1b[32;1m$ npm test\x1b[0;m
sh: 1: jest: not found
section_end:1700000031:step_script\r\x1b[0K
ERROR: Job failed: exit code 127
""")
# ---------------- transient: registries ----------------
raw("docker-pull-503-image", I, """Running with gitlab-runner 16.9.1 (782c6ecb)
  on docker-auto-scale 72989761
section_start:1700000000:prepare_executor\r\x1b[0KPreparing the "docker+machine" executor
Using Docker executor with image node:20-alpine ...
Pulling docker image node:20-alpine ...
WARNING: Failed to pull image with policy "always": Error response from daemon: received unexpected HTTP status: 503 Service Unavailable (manager.go:237:0s)
ERROR: Job failed: failed to pull image "node:20-alpine" with specified policies [always]: Error response from daemon: received unexpected HTTP status: 503 Service Unavailable (manager.go:237:0s)
""", None, "runner_system_failure")
raw("docker-pull-tls-timeout-helper", I, """Preparing the "docker" executor
Using Docker executor with image python:3.12 ...
Pulling docker image registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v16.8.0 ...
ERROR: Job failed (system failure): failed to pull image "registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v16.8.0" with specified policies [always]: Error response from daemon: Get "https://registry.gitlab.com/v2/": net/http: TLS handshake timeout (manager.go:250:10s)
""", None, "runner_system_failure")
p("docker-push-blob-upload-unknown", I, "docker push $CI_REGISTRY_IMAGE:$CI_COMMIT_SHA", """The push refers to repository [registry.gitlab.com/group/project]
5f70bf18a086: Preparing
b2a3c1e1f9c2: Pushing  142.3MB/310.2MB
5f70bf18a086: Layer already exists
blob upload unknown: blob upload unknown to registry""", 1)
p("docker-push-received-unexpected-500", I, "docker push registry.example.com/app:1.2", """The push refers to repository [registry.example.com/app]
2e1d2a1a9c3e: Pushed
received unexpected HTTP status: 500 Internal Server Error""", 1)
p("docker-build-from-pull-eof", I, "docker build -t app .", """#3 [internal] load metadata for docker.io/library/golang:1.22
#3 ERROR: failed to do request: Head "https://registry-1.docker.io/v2/library/golang/manifests/1.22": EOF
------
 > [internal] load metadata for docker.io/library/golang:1.22:
------
Dockerfile:1
--------------------
   1 | >>> FROM golang:1.22 AS build
--------------------
ERROR: failed to solve: golang:1.22: failed to resolve source metadata for docker.io/library/golang:1.22: failed to do request: Head "https://registry-1.docker.io/v2/library/golang/manifests/1.22": EOF""", 1)
p("docker-toomanyrequests", I, "docker pull postgres:16", """Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit""", 1)
p("podman-pull-reset", I, "podman pull quay.io/prometheus/prometheus:v2.50.0", """Trying to pull quay.io/prometheus/prometheus:v2.50.0...
Getting image source signatures
Copying blob sha256:4abcf20661432fb2d719aaf90656f55c287f8ca915dc1c92ec14ff61e67fbaf8
Error: copying system image from manifest list: reading blob sha256:4abcf20661432fb2d719aaf90656f55c287f8ca915dc1c92ec14ff61e67fbaf8: Get "https://cdn03.quay.io/sha256/4a/4abcf": read tcp 10.1.2.3:44312->18.1.2.3:443: read: connection reset by peer""", 125)
p("buildah-push-unexpected-eof", I, "buildah push app:latest docker://registry.example.com/app:latest", """Getting image source signatures
Copying blob 5af4f8f59b76 done
Copying blob 9f54eef41275 [==========>-----------] 40.1MiB / 88.4MiB
Error: pushing image "app:latest" to "docker://registry.example.com/app:latest": writing blob: uploading layer chunked: unexpected EOF""", 125)
p("kaniko-retrieve-remote-502", I, "/kaniko/executor --context $CI_PROJECT_DIR --destination $IMAGE", """INFO[0000] Retrieving image manifest python:3.12-slim
INFO[0000] Retrieving image python:3.12-slim from registry index.docker.io
error building image: unable to complete operation after 0 attempts, last error: GET https://index.docker.io/v2/library/python/manifests/sha256:abc: unexpected status code 502 Bad Gateway: <html><body><h1>502 Bad Gateway</h1></body></html>""", 1)
p("kaniko-push-timeout", I, "/kaniko/executor --context . --destination $CI_REGISTRY_IMAGE:latest", """INFO[0210] Pushing image to registry.gitlab.com/group/project:latest
error pushing image: failed to push to destination registry.gitlab.com/group/project:latest: Patch "https://registry.gitlab.com/v2/group/project/blobs/uploads/abc?_state=x": write tcp 10.0.1.5:51234->35.227.35.254:443: write: broken pipe""", 1)
p("crane-copy-429", I, "crane copy gcr.io/distroless/static:nonroot $CI_REGISTRY_IMAGE/static:nonroot", """Error: GET https://gcr.io/v2/distroless/static/manifests/nonroot: TOOMANYREQUESTS: Quota Exceeded.""", 1)
p("skopeo-copy-tls", I, "skopeo copy docker://docker.io/library/alpine:3.19 docker://registry.example.com/alpine:3.19", """time="2026-11-24T10:00:00Z" level=fatal msg="initializing source docker://alpine:3.19: pinging container registry registry-1.docker.io: Get \\"https://registry-1.docker.io/v2/\\": net/http: TLS handshake timeout\"""", 1)
p("containerd-ctr-pull-eof", I, "ctr image pull docker.io/library/redis:7", """docker.io/library/redis:7: resolving      |--------------------------------------|
elapsed: 30.0s                             total:   0.0 B (0.0 B/s)
ctr: failed to resolve reference "docker.io/library/redis:7": failed to do request: Head "https://registry-1.docker.io/v2/library/redis/manifests/7": dial tcp: lookup registry-1.docker.io on 10.96.0.10:53: server misbehaving""", 1)
p("helm-oci-pull-503", I, "helm pull oci://registry-1.docker.io/bitnamicharts/postgresql --version 14.0.5", """Error: failed to perform "FetchReference" on source: GET "https://registry-1.docker.io/v2/bitnamicharts/postgresql/manifests/14.0.5": response status code 503: Service Unavailable""", 1)
p("helm-repo-update-timeout", I, "helm dependency build ./chart", """Hang tight while we grab the latest from your chart repositories...
...Unable to get an update from the "bitnami" chart repository (https://charts.bitnami.com/bitnami):
	Get "https://charts.bitnami.com/bitnami/index.yaml": context deadline exceeded (Client.Timeout exceeded while awaiting headers)
Update Complete. ⎈Happy Helming!⎈
Error: no cached repository for helm-manager-1234 found. (try 'helm repo update'): open /root/.cache/helm/repository/helm-manager-1234-index.yaml: no such file or directory""", 1)
# ---------------- transient: DNS / TLS / generic network ----------------
p("curl-6-resolve", I, "curl -fsSL https://get.helm.sh/helm-v3.14.0-linux-amd64.tar.gz -o helm.tgz", """curl: (6) Could not resolve host: get.helm.sh""", 6)
p("curl-35-ssl-reset", I, "curl -fsSLO https://github.com/acme/tool/releases/download/v1/tool", """curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to github.com:443""", 35)
p("curl-56-recv", I, "curl -fL -o data.tar.gz https://data.example.org/d.tar.gz", """  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current
                                 Dload  Upload   Total   Spent    Left  Speed
 43  812M   43  353M    0     0  12.1M      0  0:01:06  0:00:29  0:00:37 11.8M
curl: (56) OpenSSL SSL_read: Connection reset by peer, errno 104""", 56)
p("curl-18-partial", I, "curl -fsSL -o jdk.tgz $JDK_URL", """curl: (18) transfer closed with 12345678 bytes remaining to read""", 18)
p("wget-read-error", I, "wget -q https://downloads.example.org/sdk.zip", """--2026-11-24 10:00:00--  https://downloads.example.org/sdk.zip
Resolving downloads.example.org (downloads.example.org)... 93.184.216.34
Connecting to downloads.example.org (downloads.example.org)|93.184.216.34|:443... connected.
HTTP request sent, awaiting response... 200 OK
Length: 524288000 (500M) [application/zip]
Saving to: 'sdk.zip'
sdk.zip              37%[======>             ] 186.2M  5.01MB/s    in 37s
2026-11-24 10:00:40 (5.01 MB/s) - Read error at byte 195225600/524288000 (Connection reset by peer). Giving up.""", 4)
p("python-requests-dns", I, "python scripts/fetch_fixtures.py", """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/site-packages/urllib3/connection.py", line 198, in _new_conn
    sock = connection.create_connection(
socket.gaierror: [Errno -3] Temporary failure in name resolution

The above exception was the direct cause of the following exception:
urllib3.exceptions.NameResolutionError: <urllib3.connection.HTTPSConnection object at 0x7f>: Failed to resolve 'storage.googleapis.com' ([Errno -3] Temporary failure in name resolution)
requests.exceptions.ConnectionError: HTTPSConnectionPool(host='storage.googleapis.com', port=443): Max retries exceeded with url: /bucket/fixtures.tar (Caused by NameResolutionError("<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to resolve 'storage.googleapis.com' ([Errno -3] Temporary failure in name resolution)"))""", 1)
p("node-fetch-etimedout", I, "node scripts/download-browsers.js", """Error: connect ETIMEDOUT 140.82.112.3:443
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16) {
  errno: -110,
  code: 'ETIMEDOUT',
  syscall: 'connect',
  address: '140.82.112.3',
  port: 443
}""", 1)
p("playwright-install-econnreset", I, "npx playwright install --with-deps chromium", """Downloading Chromium 121.0.6167.57 (playwright build v1097) from https://playwright.azureedge.net/builds/chromium/1097/chromium-linux.zip
|■■■■■■■■■■■■■■■■■■■■■■                                                          |  27% of 150.6 MiB
Error: read ECONNRESET
    at TLSWrap.onStreamRead (node:internal/stream_base_commons:217:20) {
  errno: -104,
  code: 'ECONNRESET',
  syscall: 'read'
}
Failed to install browsers
Error: Failed to download Chromium 121.0.6167.57 (playwright build v1097), caused by
Error: Download failure, code=1""", 1)
p("go-test-dns-misbehaving", I, "go test ./...", """go: downloading github.com/google/uuid v1.6.0
go: github.com/google/uuid@v1.6.0: Get "https://proxy.golang.org/github.com/google/uuid/@v/v1.6.0.mod": dial tcp: lookup proxy.golang.org on 169.254.169.254:53: server misbehaving""", 1)
p("terraform-init-registry-timeout", I, "terraform init -input=false", """Initializing provider plugins...
- Finding hashicorp/aws versions matching "~> 5.0"...
╷
│ Error: Failed to query available provider packages
│ 
│ Could not retrieve the list of available versions for provider hashicorp/aws: could not connect to registry.terraform.io: failed to request discovery document: Get "https://registry.terraform.io/.well-known/terraform.json": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)
╵""", 1)
# ---------------- transient: cloud CLIs ----------------
p("aws-s3-slowdown", I, "aws s3 sync dist/ s3://acme-site/", """upload failed: dist/assets/app.js to s3://acme-site/assets/app.js An error occurred (SlowDown) when calling the PutObject operation (reached max retries: 4): Please reduce your request rate.""", 1)
p("aws-ec2-requestlimit", I, "aws ec2 describe-instances --filters Name=tag:env,Values=ci", """An error occurred (RequestLimitExceeded) when calling the DescribeInstances operation (reached max retries: 4): Request limit exceeded.""", 254)
p("aws-cfn-throttling", I, "aws cloudformation deploy --template-file t.yml --stack-name ci", """An error occurred (Throttling) when calling the DescribeStacks operation (reached max retries: 4): Rate exceeded""", 255)
p("aws-ecr-503", I, "aws ecr get-login-password | docker login --username AWS --password-stdin $ECR", """An error occurred (ServiceUnavailableException) when calling the GetAuthorizationToken operation (reached max retries: 2): Service Unavailable
Error: Cannot perform an interactive login from a non TTY device""", 1)
p("gcloud-503", I, "gcloud container clusters get-credentials ci --region europe-west1", """ERROR: (gcloud.container.clusters.get-credentials) ResponseError: code=503, message=The service is currently unavailable.""", 1)
p("gsutil-503-backend", I, "gsutil -m cp -r build/ gs://acme-artifacts/$CI_COMMIT_SHA/", """Copying file://build/app.tar [Content-Type=application/x-tar]...
ServiceException: 503 We encountered an internal error. Please try again.
CommandException: 1 file/object could not be transferred.""", 1)
p("az-429", I, "az acr build --registry acme --image app:ci .", """ERROR: (TooManyRequests) The request is being throttled as the limit has been reached for operation type - Read_ObservationWindow_00:05:00. For more information, see - https://aka.ms/srpthrottlinglimits
Code: TooManyRequests""", 1)
p("az-storage-503", I, "az storage blob upload-batch -d '$web' -s dist", """ERROR: The server is currently unable to receive requests. Please retry your request.
ErrorCode:ServerBusy""", 1)
# ---------------- transient: runner system failures ----------------
raw("k8s-pod-timeout", I, """Running with gitlab-runner 16.10.0 (81ab07f6)
  on k8s-runner-abc 2xyz, system ID: r_123
section_start:1700000000:prepare_executor\r\x1b[0KPreparing the "kubernetes" executor
Using Kubernetes namespace: gitlab-runner
Using Kubernetes executor with image node:20 ...
section_start:1700000001:prepare_script\r\x1b[0KPreparing environment
Waiting for pod gitlab-runner/runner-2xyz-project-12-concurrent-0abcd to be running, status is Pending
Waiting for pod gitlab-runner/runner-2xyz-project-12-concurrent-0abcd to be running, status is Pending
	ContainersNotReady: "containers with unready status: [build helper]"
ERROR: Job failed (system failure): prepare environment: waiting for pod running: timed out waiting for pod to start. Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information
""", None, "runner_system_failure")
raw("k8s-context-deadline", I, """Preparing the "kubernetes" executor
Using Kubernetes executor with image alpine:3.19 ...
ERROR: Job failed (system failure): prepare environment: setting up credentials: Post "https://10.96.0.1:443/api/v1/namespaces/ci/secrets": context deadline exceeded. Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information
""", None, "runner_system_failure")
raw("docker-machine-create-fail", I, """Running with gitlab-runner 15.11.0 (436955cb)
  on autoscale-runner-1 x1y2z3
Preparing the "docker+machine" executor
ERROR: Preparation failed: exit status 1
Will be retried in 3s ...
ERROR: Preparation failed: exit status 1
Will be retried in 3s ...
ERROR: Preparation failed: exit status 1
Will be retried in 3s ...
ERROR: Job failed (system failure): exit status 1
""", None, "runner_system_failure")
raw("k8s-unexpected-eof-attach", I, """section_start:1700000100:step_script\r\x1b[0KExecuting "step_script" stage of the job script
\x1b[32;1m$ ./gradlew integrationTest\x1b[0;m
> Task :app:integrationTest
ERROR: Job failed (system failure): error sending request: Post "https://10.0.0.1:443/api/v1/namespaces/ci/pods/runner-abc-project-1-concurrent-0/attach?container=build&stdin=true": unexpected EOF
""", None, "runner_system_failure")
raw("docker-daemon-eof", I, """\x1b[32;1m$ make test\x1b[0;m
go test ./...
ERROR: Job failed (system failure): Error response from daemon: Post "http://docker/v1.43/containers/abc/wait": EOF (docker.go:933:30s)
""", None, "runner_system_failure")
raw("runner-no-space-helper", I, """Preparing the "docker" executor
Using Docker executor with image golang:1.22 ...
Pulling docker image golang:1.22 ...
ERROR: Job failed (system failure): failed to pull image "golang:1.22" with specified policies [always]: Error response from daemon: write /var/lib/docker/tmp/GetImageBlob123: no space left on device (manager.go:250:12s)
""", None, "runner_system_failure")
raw("k8s-evicted-ephemeral", I, """\x1b[32;1m$ npm run build\x1b[0;m
> app@1.0.0 build
> vite build
ERROR: Job failed (system failure): pod "gitlab-runner/runner-abc-project-5-concurrent-2xyz" status is "Failed": The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 8204Ki. Container build was using 14Gi, request is 0, has larger consumption of ephemeral-storage.
""", None, "runner_system_failure")
raw("k8s-node-preempted", I, """\x1b[32;1m$ pytest -n 4\x1b[0;m
============================= test session starts ==============================
ERROR: Job failed (system failure): pod "ci/runner-x-project-9-concurrent-1" is disrupted: reason "DisruptionTarget", message "Pod was terminated in response to imminent node shutdown."
""", None, "runner_system_failure")
raw("fleeting-instance-gone", I, """Running with gitlab-runner 16.11.0 (91a27b2a)
  on fleeting-aws abc123
Preparing the "docker-autoscaler" executor
Dialing instance i-0abc123...
ERROR: Job failed (system failure): preparing environment: dial ssh: after retrying 30 times: dial tcp 10.0.3.17:22: connect: connection refused
""", None, "runner_system_failure")
raw("stale-file-handle", I, """\x1b[32;1m$ make -j8\x1b[0;m
g++ -c src/a.cc -o build/a.o
cc1plus: fatal error: src/a.cc: Stale file handle
compilation terminated.
make: *** [Makefile:12: build/a.o] Error 1
ERROR: Job failed: exit code 2
""")
p("enospc-npm", I, "npm ci", """npm ERR! code ENOSPC
npm ERR! syscall write
npm ERR! errno -28
npm ERR! nospc ENOSPC: no space left on device, write
npm ERR! nospc There appears to be insufficient space on your system to finish.
npm ERR! nospc Clear up some disk space and try again.""", 228)
p("enospc-go-build", I, "go build -o bin/app ./cmd/app", """# github.com/acme/app/cmd/app
/usr/local/go/pkg/tool/linux_amd64/link: flushing $WORK/b001/exe/a.out: write $WORK/b001/exe/a.out: no space left on device""", 1)
p("enospc-ld", I, "make -j4", """/usr/bin/ld: final link failed: No space left on device
collect2: error: ld returned 1 exit status
make: *** [Makefile:40: app] Error 1""", 2)
p("enospc-docker-build", I, "docker build -t app .", """#12 [build 5/8] RUN npm ci
#12 ERROR: failed to copy files: copy file range failed: no space left on device
------
ERROR: failed to solve: failed to compute cache key: failed to copy: write /var/lib/docker/overlay2/x/diff/app/node_modules.tar: no space left on device""", 1)
p("enospc-pip", I, "pip install torch", """ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device""", 1)
p("disk-quota-exceeded", I, "tar xzf cache.tgz", """tar: node_modules/.cache/webpack/pack-1.pack: Wrote only 4096 of 10240 bytes
tar: Exiting with failure status due to previous errors
tar: node_modules: Cannot write: Disk quota exceeded""", 2)
p("spot-termination", I, "./run-e2e.sh", """[e2e] starting suite 3/8
Received a SIGTERM. Spot instance interruption notice: instance i-0abc will be terminated at 2026-11-24T10:02:00Z
Terminated""", 143)
p("text-file-busy-exec", I, "./build/tool --gen", """/builds/g/p/.gitlab-ci.sh: line 142: ./build/tool: Text file busy""", 126)

# ---------------- OOM ----------------
p("gcc-killed-signal", O, "make -j16", """g++ -O2 -c src/parser/grammar.cc -o build/grammar.o
g++: fatal error: Killed signal terminated program cc1plus
compilation terminated.
make[2]: *** [src/CMakeFiles/core.dir/build.make:76: src/CMakeFiles/core.dir/parser/grammar.cc.o] Error 1""", 2)
p("gcc-internal-killed", O, "make", """In file included from /usr/include/c++/12/bits/stl_algo.h:61,
c++: internal compiler error: Killed (program cc1plus)
Please submit a full bug report, with preprocessed source (by using -freport-bug).
See <file:///usr/share/doc/gcc-12/README.Bugs> for instructions.
make: *** [Makefile:30: big.o] Error 4""", 2)
p("clang-signal-9", O, "ninja -C build", """[412/980] Building CXX object lib/CodeGen/CMakeFiles/LLVMCodeGen.dir/SelectionDAG/DAGCombiner.cpp.o
FAILED: lib/CodeGen/CMakeFiles/LLVMCodeGen.dir/SelectionDAG/DAGCombiner.cpp.o
/usr/bin/clang++ -O3 -c DAGCombiner.cpp -o DAGCombiner.cpp.o
clang++: error: unable to execute command: Killed
clang++: error: clang frontend command failed due to signal (use -v to see invocation)
ninja: build stopped: subcommand failed.""", 1)
p("clang-crash-signal-9", O, "make -j8", """clang-16: error: clang frontend command failed with exit code 137 (use -v to see invocation)
make[1]: *** [build/huge.o] Error 1""", 2)
p("rustc-sigkill", O, "cargo build --release", """   Compiling polars-core v0.36.2
error: could not compile `polars-core` (lib)

Caused by:
  process didn't exit successfully: `/usr/local/rustup/toolchains/1.75.0-x86_64-unknown-linux-gnu/bin/rustc --crate-name polars_core --edition=2021 ...` (signal: 9, SIGKILL: kill)""", 101)
p("rustc-linker-sigkill", O, "cargo test --no-run", """error: linking with `cc` failed: signal: 9 (SIGKILL)
  |
  = note: LC_ALL="C" PATH="/usr/local/cargo/bin" "cc" "-m64" "/tmp/rustcX/symbols.o" ...
  = note: 

error: could not compile `app` (bin "app" test) due to 1 previous error""", 101)
p("ld-terminated-9", O, "make", """collect2: fatal error: ld terminated with signal 9 [Killed]
compilation terminated.
make: *** [Makefile:55: bin/server] Error 1""", 2)
p("lld-killed", O, "ninja", """[1203/1204] Linking CXX executable bin/clang
FAILED: bin/clang
clang++: error: unable to execute command: Killed
clang++: error: linker command failed due to signal (use -v to see invocation)
ninja: build stopped: subcommand failed.""", 1)
p("mold-killed", O, "cmake --build build -j", """[100%] Linking CXX executable app
collect2: fatal error: ld.mold terminated with signal 9 [Killed]
compilation terminated.
gmake[2]: *** [CMakeFiles/app.dir/build.make:1023: app] Error 1
gmake[1]: *** [CMakeFiles/Makefile2:145: CMakeFiles/app.dir/all] Error 2
gmake: *** [Makefile:91: all] Error 2""", 2)
p("nvcc-killed", O, "make -j8 CUDA=1", """nvcc -O3 -arch=sm_80 -c kernels/attn.cu -o build/attn.o
nvcc error   : 'cicc' died due to signal 9 (Kill signal)
make: *** [Makefile:48: build/attn.o] Error 9""", 2)
p("ghc-killed", O, "cabal build all", """[ 42 of 120] Compiling Data.Big.Generic ( src/Data/Big/Generic.hs, dist-newstyle/build/x86_64-linux/ghc-9.6.4/big-0.1/build/Data/Big/Generic.o )
Error: cabal: Failed to build big-0.1 (which is required by exe:app from app-0.1).
The build process was killed (i.e. SIGKILL). The typical reason for this is
that there is not enough memory available (e.g. the OS killed a process using
lots of memory).""", 1)
p("stack-ghc-killed", O, "stack build", """[ 12 of 88] Compiling Lens.Generated
Progress 3/40

--  While building package big-0.1 (scroll up to its section to see the error) using:
      /root/.stack/setup-exe-cache/x86_64-linux/Cabal-simple_6HauvNHV_3.10.1.0_ghc-9.6.4 --verbose=1 --builddir=.stack-work/dist/x86_64-linux/ghc-9.6.4 build --ghc-options " -fdiagnostics-color=always"
    Process exited with code: ExitFailure (-9) (THIS MAY INDICATE OUT OF MEMORY)""", 1)
p("go-build-signal-killed", O, "go build ./...", """# github.com/acme/huge/internal/generated
/usr/local/go/pkg/tool/linux_amd64/compile: signal: killed""", 1)
p("go-test-link-killed", O, "go test -race ./...", """# github.com/acme/svc/internal/api.test
/usr/local/go/pkg/tool/linux_amd64/link: signal: killed
FAIL	github.com/acme/svc/internal/api [build failed]""", 1)
p("swiftc-killed", O, "swift build -c release", """[120/340] Compiling App Generated.swift
error: compile command failed due to signal 9 (use -v to see invocation)
<unknown>:0: error: unable to execute command: Killed""", 1)
p("msbuild-msb6006-137", O, "dotnet build -c Release", """  Restored /builds/g/app/src/App/App.csproj (in 2.1 sec).
/usr/share/dotnet/sdk/8.0.101/Roslyn/Microsoft.CSharp.Core.targets(80,5): error MSB6006: "dotnet" exited with code 137. [/builds/g/app/src/App/App.csproj]

Build FAILED.""", 1)
p("javac-oom", O, "mvn -B compile", """[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.11.0:compile (default-compile) on project core: Fatal error compiling: java.lang.OutOfMemoryError: Java heap space -> [Help 1]""", 1)
p("kotlin-daemon-oom", O, "./gradlew assembleRelease", """e: java.lang.OutOfMemoryError: Java heap space
> Task :app:compileReleaseKotlin FAILED

FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':app:compileReleaseKotlin'.
> Compilation error. See log for more details""", 1)
p("gradle-daemon-disappeared", O, "./gradlew build", """> Task :app:compileJava

FAILURE: Build failed with an exception.

* What went wrong:
Gradle build daemon disappeared unexpectedly (it may have been killed or may have crashed)""", 1)
p("gradle-metaspace", O, "./gradlew test", """* What went wrong:
Execution failed for task ':core:compileTestKotlin'.
> Error while evaluating property 'filteredArgumentsMap' of task ':core:compileTestKotlin'.
   > java.lang.OutOfMemoryError: Metaspace""", 1)
p("d8-gc-overhead", O, "./gradlew assembleDebug", """> Task :app:mergeDexDebug FAILED
ERROR:D8: java.lang.OutOfMemoryError: GC overhead limit exceeded
com.android.tools.r8.CompilationFailedException: Compilation failed to complete""", 1)
p("node-heap-oom", O, "npm run build", """> webpack --mode production

<--- Last few GCs --->

[38:0x5a1c3d0]   112233 ms: Mark-Compact 2031.9 (2083.5) -> 2030.6 (2083.7) MB, 1523.41 / 0.00 ms  (average mu = 0.12, current mu = 0.01) allocation failure; scavenge might not succeed

<--- JS stacktrace --->

FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory
 1: 0xb8f8a0 node::Abort() [node]
 2: 0xa9d63c  [node]
Aborted (core dumped)""", 134)
p("node-ineffective-mark-compacts", O, "npx tsc -b", """FATAL ERROR: Ineffective mark-compacts near heap limit Allocation failed - JavaScript heap out of memory
----- Native stack trace -----""", 134)
p("python-memoryerror", O, "python train.py --epochs 1", """Epoch 1/1: loading dataset
Traceback (most recent call last):
  File "/builds/g/ml/train.py", line 88, in <module>
    X = np.zeros((n_samples, n_features), dtype=np.float64)
numpy.core._exceptions._ArrayMemoryError: Unable to allocate 37.3 GiB for an array with shape (50000000, 100) and data type float64""", 1)
p("python-plain-memoryerror", O, "python -m build_index", """Traceback (most recent call last):
  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main
  File "/builds/g/p/build_index.py", line 40, in build
    table = {k: v for k, v in rows}
MemoryError""", 1)
p("ruby-nomemoryerror", O, "bundle exec rake assets:precompile", """rake aborted!
NoMemoryError: failed to allocate memory
/usr/local/bundle/gems/sprockets-4.2.1/lib/sprockets/base.rb:82:in `find_asset'
Tasks: TOP => assets:precompile""", 1)
p("go-runtime-oom", O, "go test ./...", """fatal error: runtime: out of memory

runtime stack:
runtime.throw({0x9f3c1a?, 0x2000?})
	/usr/local/go/src/runtime/panic.go:1077 +0x5c fp=0x7ffd
runtime.sysMapOS(0xc400000000, 0x4000000)""", 2)
p("dotnet-oom-exception", O, "dotnet test", """  Failed to compile: System.OutOfMemoryException: Exception of type 'System.OutOfMemoryException' was thrown.
   at System.Collections.Generic.List`1.set_Capacity(Int32 value)
   at Microsoft.CodeAnalysis.CSharp.CSharpCompilation.Emit()
Build FAILED.""", 1)
p("kernel-oom-dmesg", O, "./scripts/build-all.sh", """[12345.678901] Out of memory: Killed process 4242 (cc1plus) total-vm:5123456kB, anon-rss:3987654kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:8000kB oom_score_adj:0
./scripts/build-all.sh: line 12:  4242 Killed                  make -j8""", 137)
p("memcg-oom-constraint", O, "dmesg | tail -3; exit 1", """[ 9981.1] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/burstable/pod1234,task_memcg=/kubepods/burstable/pod1234/abc,task=java,pid=812,uid=1000
[ 9981.2] Memory cgroup out of memory: Killed process 812 (java) total-vm:9123456kB, anon-rss:4194304kB""", 1)
raw("k8s-oomkilled-status", O, """\x1b[32;1m$ ./gradlew build\x1b[0;m
> Task :app:compileJava
ERROR: Job failed (system failure): pod "ci/runner-abc-project-42-concurrent-0xyz" status is "Failed": container "build" terminated: OOMKilled (exit code 137)
""", None, "runner_system_failure")
raw("k8s-oomkilled-reason", O, """\x1b[32;1m$ make -j$(nproc)\x1b[0;m
[ 45%] Building CXX object src/CMakeFiles/core.dir/big.cc.o
ERROR: Job failed: command terminated with exit code 137
""", 137)
p("docker-build-run-137", O, "docker build -t app .", """#9 [build 4/6] RUN npm run build
#9 23.41 > vite build
#9 58.12 transforming (4213) src/components/Chart.tsx
#9 ERROR: process "/bin/sh -c npm run build" did not complete successfully: exit code: 137
------
 > [build 4/6] RUN npm run build:
------
ERROR: failed to solve: process "/bin/sh -c npm run build" did not complete successfully: exit code: 137""", 1)
p("docker-legacy-run-137", O, "docker build -t app .", """Step 7/12 : RUN cargo build --release
 ---> Running in 3f2a1b
   Compiling tokio v1.36.0
The command '/bin/sh -c cargo build --release' returned a non-zero code: 137""", 137)
p("kaniko-run-137", O, "/kaniko/executor --context . --destination $IMG", """INFO[0042] RUN mvn -B package -DskipTests
INFO[0042] Running: [/bin/sh -c mvn -B package -DskipTests]
error building image: error building stage: failed to execute command: waiting for process to exit: exit status 137""", 1)
p("make-error-137", O, "make -j8", """g++ -O2 -c src/huge_template.cc -o huge_template.o
make: *** [Makefile:20: huge_template.o] Error 137""", 2)
p("ninja-killed", O, "ninja -C out", """[3120/9000] CXX obj/v8/src/compiler/backend/instruction-selector.o
FAILED: obj/v8/src/compiler/backend/instruction-selector.o
Killed
ninja: build stopped: subcommand failed.""", 1)
p("bazel-killed-signal9", O, "bazel build //...", """ERROR: /builds/g/p/src/BUILD:12:10: Compiling src/big.cc failed: (Killed): gcc failed: error executing CppCompile command (from target //src:big) /usr/bin/gcc -U_FORTIFY_SOURCE -fstack-protector ... 
INFO: Elapsed time: 512.341s, Critical Path: 480.12s
FAILED: Build did NOT complete successfully""", 1)
p("bazel-server-oom", O, "bazel test //...", """Server terminated abruptly (error code: 14, error message: 'Socket closed', log file: '/root/.cache/bazel/_bazel_root/abc/server/jvm.out')""", 37)
p("cmake-build-killed", O, "cmake --build build --parallel 8", """[ 62%] Building CXX object src/CMakeFiles/eigen_heavy.dir/solve.cpp.o
c++: fatal error: Killed signal terminated program cc1plus
compilation terminated.
gmake[2]: *** [src/CMakeFiles/eigen_heavy.dir/build.make:90: src/CMakeFiles/eigen_heavy.dir/solve.cpp.o] Error 1""", 2)
p("meson-killed", O, "meson compile -C build", """[88/240] Compiling C++ object src/libcore.so.p/gen.cpp.o
FAILED: src/libcore.so.p/gen.cpp.o
c++ -Isrc/libcore.so.p -O2 -c ../src/gen.cpp
c++: fatal error: Killed signal terminated program cc1plus
compilation terminated.
ninja: build stopped: subcommand failed.""", 1)
p("scons-killed", O, "scons -j8", """g++ -o build/core/big.o -c -O2 src/core/big.cpp
scons: *** [build/core/big.o] Error -9
scons: building terminated because of errors.""", 2)
p("pytest-xdist-crashed-sigkill", O, "pytest -n 4 tests/", """[gw2] node down: Not properly terminated
[gw2] [ 61%] FAILED tests/test_model.py::test_fit_large
replacing crashed worker gw2
=================================== FAILURES ===================================
_______________________________ tests/test_model.py ____________________________
[gw2] linux -- Python 3.11.7 /usr/local/bin/python
worker 'gw2' crashed while running 'tests/test_model.py::test_fit_large'
=========================== short test summary info ============================
FAILED tests/test_model.py::test_fit_large
========================= 1 failed, 211 passed in 312.04s ======================""", 1)
p("jest-worker-sigkill", O, "npx jest --ci", """ FAIL  src/__tests__/bigdata.test.ts
  ● Test suite failed to run

    A jest worker process (pid=312) was terminated by another process: signal=SIGKILL, exitCode=null. Operating system logs may contain more information on why this occurred.

Test Suites: 1 failed, 88 passed, 89 total""", 1)
p("gradle-test-executor-137", O, "./gradlew test", """> Task :core:test FAILED

FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':core:test'.
> Process 'Gradle Test Executor 3' finished with non-zero exit value 137
  This problem might be caused by incorrect test process configuration.""", 1)
p("sbt-forked-137", O, "sbt test", """[error] Test runner exited with non-zero code 137
[error] (Test / test) sbt.ForkMain$ForkError: Forked test harness failed with exit code 137""", 1)
p("webpack-killed-shell", O, "npm run build", """> app@1.0.0 build
> next build

   Creating an optimized production build ...
Killed
npm ERR! code 137""", 137)
p("sh-killed-line", O, "python scripts/gen_data.py", """Generating embeddings: 48%|████▊     | 4812/10000
/usr/bin/bash: line 152:   812 Killed                  python scripts/gen_data.py""", 137)
p("qemu-test-killed", O, "meson test -C build --suite qemu", """ 3/12 qemu-aarch64-boot        FAIL            412.11s   killed by signal 9 SIGKILL
>>> MALLOC_PERTURB_=211 /builds/g/p/build/tests/boot.sh""", 1)
p("tsc-heap-oom-137-nomsg", O, "npx vue-tsc --noEmit", """
npm ERR! path /builds/g/web
npm ERR! command failed
npm ERR! signal SIGKILL
npm ERR! command sh -c vue-tsc --noEmit""", 1)
p("cc1plus-no-dash", O, "make -j12", """x86_64-linux-gnu-g++: fatal error: Killed signal terminated program cc1plus
compilation terminated.""", 2)
p("java-hs-err-oom", O, "java -jar tools/codegen.jar", """#
# There is insufficient memory for the Java Runtime Environment to continue.
# Native memory allocation (mmap) failed to map 268435456 bytes for committing reserved memory.
# An error report file with more information is saved as:
# /builds/g/p/hs_err_pid812.log""", 1)
p("clang-ld-lld-signal-killed", O, "cargo build --release", """  = note: clang: error: unable to execute command: Killed
          clang: error: linker command failed due to signal (use -v to see invocation)
error: could not compile `huge` (bin "huge") due to 1 previous error""", 101)
p("pip-build-wheel-killed", O, "pip install --no-binary :all: scipy", """  Building wheel for scipy (pyproject.toml): started
  error: subprocess-exited-with-error
  × Building wheel for scipy (pyproject.toml) did not run successfully.
  │ exit code: -9
  ╰─> [8 lines of output]
      [120/1500] Compiling C++ object scipy/special/_ufuncs_cxx.so.p/ellint_carlson.cpp.o
      FAILED: scipy/special/_ufuncs_cxx.so.p/ellint_carlson.cpp.o
      c++: fatal error: Killed signal terminated program cc1plus""", 1)

# ---------------- traps (must stay right: no retry, no resize) ----------------
p("trap-test-named-oom", "build_error", "pytest -q", """FAILED tests/test_limits.py::test_oom_killed_container_is_reported - AssertionError: assert 'OOMKilled' == 'Completed'
=========================== short test summary info ============================
FAILED tests/test_limits.py::test_oom_killed_container_is_reported
1 failed, 301 passed in 12.30s""", 1)
p("trap-test-named-timeout", "build_error", "go test ./...", """--- FAIL: TestClientRetriesOnConnectionReset (0.01s)
    client_test.go:88: expected 3 retries after connection reset by peer, got 1
FAIL
FAIL	github.com/acme/client	0.214s""", 1)
p("trap-sigkill-test", "build_error", "cargo test", """---- supervisor::tests::restarts_after_sigkill stdout ----
thread 'supervisor::tests::restarts_after_sigkill' panicked at src/supervisor.rs:120:9:
assertion `left == right` failed: child killed by SIGKILL was not restarted
  left: 0
 right: 1
failures:
    supervisor::tests::restarts_after_sigkill
test result: FAILED. 41 passed; 1 failed""", 101)
p("trap-remote-es-oom", "build_error", "pytest tests/integration", """E   elasticsearch.ApiError: ApiError(500, 'circuit_breaking_exception', '[parent] Data too large, data for [<http_request>] would be [1040531560/992.3mb], which is larger than the limit of [1020054732/972.7mb]')
FAILED tests/integration/test_bulk.py::test_bulk_index - elasticsearch.ApiError
1 failed, 20 passed""", 1)
p("trap-jvm-xmx-fixed-test", "build_error", "mvn -B test", """[ERROR] Tests run: 12, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 1.2 s <<< FAILURE! -- in com.acme.CacheTest
[ERROR] com.acme.CacheTest.evictsWhenOutOfMemory -- Time elapsed: 0.1 s <<< FAILURE!
org.opentest4j.AssertionFailedError: expected: <true> but was: <false>
[ERROR] Failures: 
[ERROR]   CacheTest.evictsWhenOutOfMemory:42 expected: <true> but was: <false>
[ERROR] Tests run: 120, Failures: 1, Errors: 0, Skipped: 0""", 1)
p("trap-curl-404", "build_error", "curl -fsSL -o tool https://github.com/acme/tool/releases/download/v9.9.9/tool", """curl: (22) The requested URL returned error: 404""", 22)
p("trap-npm-e404", "config_error", "npm ci", """npm ERR! code E404
npm ERR! 404 Not Found - GET https://registry.npmjs.org/@acme%2finternal-lib - Not found
npm ERR! 404 
npm ERR! 404  '@acme/internal-lib@^2.0.0' is not in this registry.""", 1)
p("trap-pip-no-such-version", "config_error", "pip install requests==9.9.9", """ERROR: Could not find a version that satisfies the requirement requests==9.9.9 (from versions: 0.2.0, 0.2.1, 2.31.0, 2.32.0)
ERROR: No matching distribution found for requests==9.9.9""", 1)
p("trap-docker-denied", "config_error", "docker push registry.example.com/app:1", """The push refers to repository [registry.example.com/app]
denied: requested access to the resource is denied""", 1)
p("trap-cargo-compile-error", "build_error", "cargo build", """error[E0308]: mismatched types
  --> src/net.rs:42:18
   |
42 |     let t: u32 = timeout;
   |                  ^^^^^^^ expected `u32`, found `Duration`
error: could not compile `app` (lib) due to 1 previous error""", 101)
p("trap-gcc-error", "build_error", "make", """src/oom_guard.c:12:5: error: implicit declaration of function 'mallinfo2' [-Werror=implicit-function-declaration]
   12 |     mallinfo2();
cc1: all warnings being treated as errors
make: *** [Makefile:8: src/oom_guard.o] Error 1""", 2)
p("trap-aws-access-denied", "config_error", "aws s3 cp dist s3://acme-site --recursive", """upload failed: dist/index.html to s3://acme-site/index.html An error occurred (AccessDenied) when calling the PutObject operation: Access Denied""", 1)
p("trap-terraform-invalid", "config_error", "terraform plan", """╷
│ Error: Invalid value for variable
│ 
│   on variables.tf line 3:
│    3: variable "instance_type" {
╵""", 1)
p("trap-jest-timeout-test", "build_error", "npx jest", """  ● api › retries on ETIMEDOUT

    thrown: "Exceeded timeout of 5000 ms for a test.
    Add a timeout value to this test to increase the timeout, if this is a long-running test."

Tests:       1 failed, 80 passed, 81 total""", 1)
p("trap-go-test-memory-assert", "build_error", "go test ./...", """--- FAIL: TestAllocatorOutOfMemory (0.00s)
    alloc_test.go:31: Alloc(1<<40) = nil error, want ErrOutOfMemory
FAIL""", 1)
p("trap-python-typeerror", "build_error", "python -m app.migrate", """Traceback (most recent call last):
  File "/builds/g/p/app/migrate.py", line 14, in main
    conn = connect(timeout="30")
TypeError: '<' not supported between instances of 'str' and 'int'""", 1)
p("trap-helm-upgrade-failed", "build_error", "helm upgrade --install app ./chart --wait --timeout 5m", """Error: UPGRADE FAILED: cannot patch "app" with kind Deployment: Deployment.apps "app" is invalid: spec.template.spec.containers[0].resources.requests: Invalid value: "8Gi": must be less than or equal to memory limit""", 1)
p("trap-pytest-memoryerror-expected", "build_error", "pytest -q", """    def test_rejects_huge_allocation():
        with pytest.raises(MemoryError):
>           allocate(10**6)
E       Failed: DID NOT RAISE <class 'MemoryError'>
tests/test_alloc.py:9: Failed
FAILED tests/test_alloc.py::test_rejects_huge_allocation - Failed: DID NOT RAISE <class 'MemoryError'>""", 1)
p("trap-kubectl-rollout-deadline", "build_error", "kubectl rollout status deploy/app --timeout=120s", """Waiting for deployment "app" rollout to finish: 0 of 2 updated replicas are available...
error: deployment "app" exceeded its progress deadline""", 1)
p("trap-shellcheck", "build_error", "shellcheck ci/*.sh", """In ci/retry.sh line 4:
if [ $? -eq 137 ]; then echo "OOM Killed"; fi
     ^-- SC2181 (style): Check exit code directly with e.g. 'if mycmd;', not indirectly with $?.""", 1)

