// A long-lived Repomix: loading Repomix takes Node ~0.75 s, longer than packing a step's files,
// so the supervisor keeps one of these per process and sends it one JSON request per line.
// Request:  {"cwd": "/abs/tmp/dir", "paths": ["rel/a.py", ...], "output": "/abs/tmp/file.xml"}
// Response: {"ok": true, "output": "..."} or {"ok": false, "error": "..."}, one line each.
// Options mirror the CLI call it replaces: `repomix --stdin --stdout --style xml
// --no-file-summary --no-directory-structure`, and are the supervisor's only: no repomix config
// file (the worktree's or a global one) is loaded, so no instruction file, include list or
// ignore setting a worker wrote applies; `cwd` is a host directory of regular files the
// supervisor wrote from blobs (supervisor/context/packer.py), so nothing is read through a symlink.
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const library = pathToFileURL(process.argv[2]).href;
// Repomix's index also loads its CLI, MCP server and tree-sitter parsers: a third of its ~0.45
// CPU-s of loading, in every supervisor process that packs. Only the modules used here are
// loaded; none of them is in Repomix's public index, and the version is pinned in package-lock.json.
const load = (module) => import(new URL(module, library).href);
const [
  { pack },
  { mergeConfigs },
  { setLogLevel },
  { runSecurityCheck },
  { initTaskRunner },
  { validateFileSafety },
  { filterOutUntrustedFiles },
] = await Promise.all([
  load("./core/packager.js"),
  load("./config/configLoad.js"),
  load("./shared/logger.js"),
  load("./core/security/securityCheck.js"),
  load("./shared/processConcurrency.js"),
  load("./core/security/validateFileSafety.js"),
  load("./core/security/filterOutUntrustedFiles.js"),
]);
setLogLevel(-1); // silent: stdout carries the protocol only

// Repomix starts a pool of secret-scanning worker threads on every pack and tears it down after;
// starting them (each loads secretlint) was most of a small pack's ~80 ms. One pool, sized as
// Repomix sizes it for a large pack (two threads at most), serves every pack of this process.
// The scan and what it drops are Repomix's own.
let securityPool;
const sharedSecurityPool = () => {
  securityPool ??= initTaskRunner({
    numOfTasks: 1000,
    workerType: "securityCheck",
    runtime: "worker_threads",
    maxWorkerThreads: 2,
  });
  return { run: (task) => securityPool.run(task), cleanup: async () => {} };
};
const SHARED_SECURITY_POOL = {
  validateFileSafety: (rawFiles, progress, config, gitDiff, gitLog) =>
    validateFileSafety(rawFiles, progress, config, gitDiff, gitLog, {
      runSecurityCheck: (files, callback, diff, log) =>
        runSecurityCheck(files, callback, diff, log, {
          initTaskRunner: sharedSecurityPool,
          getProcessConcurrency: () => 2,
        }),
      filterOutUntrustedFiles,
    }),
};

// Repomix's own token metrics start a tiktoken worker on every pack; the supervisor counts
// tokens itself (supervisor/context/tokens.py), so they are skipped through pack()'s dependency seam.
const SKIP_METRICS = {
  createMetricsTaskRunner: () => ({
    taskRunner: { run: async () => 0, cleanup: async () => {} },
    warmupPromise: Promise.resolve(),
  }),
  calculateMetrics: async () => ({
    totalFiles: 0,
    totalCharacters: 0,
    totalTokens: 0,
    fileCharCounts: {},
    fileTokenCounts: {},
    gitDiffTokenCount: 0,
    gitLogTokenCount: 0,
  }),
};

async function packOnce({ cwd, paths, output }) {
  // What Repomix's CLI builds from `--style xml --no-file-summary --no-directory-structure -o`.
  const cliConfig = {
    output: { filePath: output, style: "xml", fileSummary: false, directoryStructure: false },
  };
  const config = mergeConfigs(cwd, {}, cliConfig);
  config.output.instructionFilePath = undefined;
  config.ignore.useGitignore = false;
  config.ignore.useDotIgnore = false;
  config.ignore.customPatterns = [];
  config.include = [];
  config.output.stdout = false;
  config.output.copyToClipboard = false;
  const files = [...new Set(paths.map((p) => path.resolve(cwd, p)))];
  try {
    await pack([cwd], config, () => {}, { ...SKIP_METRICS, ...SHARED_SECURITY_POOL }, files);
    return await readFile(output, "utf8");
  } finally {
    await rm(output, { force: true });
  }
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let reply;
  try {
    reply = { ok: true, output: await packOnce(JSON.parse(line)) };
  } catch (error) {
    reply = { ok: false, error: String(error?.stack ?? error) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
// stdin closed: the supervisor is gone. The pool's idle thread would keep Node alive.
await securityPool?.cleanup();
process.exit(0);
