"""Small monorepos of each kind, written by the specs: a pnpm workspace (TypeScript, vitest, a
shared types package and two apps), a uv workspace of two Python packages, a Go workspace."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def commit(root: Path) -> Path:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "workspace"], check=True)
    return root


def _package(name: str, deps: dict[str, str] | None = None, **extra: object) -> str:
    body: dict[str, object] = {
        "name": name,
        "version": "1.0.0",
        "private": True,
        "scripts": {"test": "vitest run", "typecheck": "tsc --noEmit -p ."},
        "devDependencies": {"typescript": "^5.4", "vitest": "^1.6"},
        **extra,
    }
    if deps:
        body["dependencies"] = deps
    return json.dumps(body, indent=2)


PNPM: dict[str, str] = {
    "package.json": json.dumps(
        {"name": "acme", "private": True, "packageManager": "pnpm@9.1.0"}, indent=2
    ),
    "pnpm-workspace.yaml": "packages:\n  - 'apps/*'\n  - 'packages/*'\n  - '!**/fixtures/**'\n",
    "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
    "tsconfig.base.json": '{"compilerOptions": {"strict": true}}\n',
    "packages/types/package.json": _package(
        "@acme/types", types="src/index.ts", exports={".": "./src/index.ts"}
    ),
    "packages/types/tsconfig.json": '{"extends": "../../tsconfig.base.json"}\n',
    "packages/types/src/index.ts": "export * from './user';\n",
    "packages/types/src/user.ts": "export interface User {\n  id: string;\n  name: string;\n}\n",
    "packages/types/src/internal/cache.ts": "export const cache = new Map<string, string>();\n",
    "apps/web/package.json": _package("@acme/web", {"@acme/types": "workspace:*", "react": "^18"}),
    "apps/web/tsconfig.json": '{"extends": "../../tsconfig.base.json"}\n',
    "apps/web/src/greet.ts": "import type { User } from '@acme/types';\n\n"
    "export const greet = (u: User): string => `hello ${u.name}`;\n",
    "apps/web/src/greet.test.ts": "import { expect, test } from 'vitest';\n"
    "import { greet } from './greet';\n\n"
    "test('greets', () => expect(greet({ id: '1', name: 'a' })).toBe('hello a'));\n",
    "apps/admin/package.json": _package("@acme/admin", {"@acme/types": "workspace:^"}),
    "apps/admin/src/audit.ts": "import type { User } from '@acme/types';\n\n"
    "export const ADMIN_SECRET_SAUCE = (u: User): string => u.id;\n",
    "apps/admin/fixtures/sample/package.json": '{"name": "sample"}\n',
}

UV: dict[str, str] = {
    "pyproject.toml": '[project]\nname = "acme-root"\nversion = "0"\nrequires-python = ">=3.11"\n'
    '[tool.uv.workspace]\nmembers = ["packages/*"]\n'
    '[dependency-groups]\ndev = ["pytest>=8"]\n',
    "uv.lock": "version = 1\n",
    "packages/core/pyproject.toml": '[project]\nname = "acme-core"\nversion = "0.1.0"\n'
    'dependencies = []\n[tool.pytest.ini_options]\naddopts = "-q"\n',
    "packages/core/src/acme_core/__init__.py": "from .money import add\n\n__all__ = ['add']\n",
    "packages/core/src/acme_core/money.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
    "packages/core/tests/test_money.py": "from acme_core import add\n\n\ndef test_add():\n"
    "    assert add(1, 2) == 3\n",
    "packages/api/pyproject.toml": '[project]\nname = "acme-api"\nversion = "0.1.0"\n'
    'dependencies = ["acme_core"]\n[tool.uv.sources]\nacme_core = { workspace = true }\n',
    "packages/api/src/acme_api/__init__.py": "",
    "packages/api/src/acme_api/app.py": "from acme_core import add\n\n\ndef total(xs):\n"
    "    return sum(xs)\n",
    "packages/api/tests/test_app.py": "import pytest\nfrom acme_api.app import total\n\n\n"
    "def test_total():\n    assert total([1, 2]) == 3\n",
}

GO: dict[str, str] = {
    "go.work": "go 1.22\n\nuse (\n\t./lib // the shared library\n\t./cmd/server\n)\n",
    "lib/go.mod": "module example.com/acme/lib\n\ngo 1.22\n",
    "lib/lib.go": "package lib\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
    "lib/lib_test.go": "package lib\n",
    "cmd/server/go.mod": "module example.com/acme/server\n\ngo 1.22\n\n"
    "require example.com/acme/lib v0.0.0\n\nreplace example.com/acme/lib => ../../lib\n",
    "cmd/server/main.go": 'package main\n\nimport "example.com/acme/lib"\n\n'
    "func main() { _ = lib.Add(1, 2) }\n",
}
