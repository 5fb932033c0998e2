// A long-lived Repomix: loading Repomix takes Node ~0.75 s, longer than packing a step's files,
// so the supervisor keeps one of these per process and sends it one JSON request per line.
// Request:  {"cwd": "/abs/tmp/dir", "paths": ["rel/a.py", ...], "output": "/abs/tmp/file.xml"}
// Response: {"ok": true, "output": "..."} or {"ok": false, "error": "..."}, one line each.
// Options mirror the CLI call it replaces: `repomix --stdin --stdout --style xml
// --no-file-summary --no-directory-structure`, and are the supervisor's only: no repomix config
// file (the worktree's or a global one) is loaded, so no instruction file, include list or
// ignore setting a worker wrote applies; `cwd` is a host directory of regular files the
// supervisor wrote from blobs (supervisor/packer.py), so nothing is read through a symlink.
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const repomix = await import(pathToFileURL(process.argv[2]).href);
repomix.setLogLevel(-1); // silent: stdout carries the protocol only

// Repomix's own token metrics start a tiktoken worker on every pack; the supervisor counts
// tokens itself (supervisor/tokens.py), so they are skipped through pack()'s dependency seam.
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
  const cliConfig = repomix.buildCliConfig({
    style: "xml",
    fileSummary: false,
    directoryStructure: false,
    output,
  });
  const config = repomix.mergeConfigs(cwd, {}, cliConfig);
  config.output.instructionFilePath = undefined;
  config.ignore.useGitignore = false;
  config.ignore.useDotIgnore = false;
  config.ignore.customPatterns = [];
  config.include = [];
  config.output.stdout = false;
  config.output.copyToClipboard = false;
  const files = [...new Set(paths.map((p) => path.resolve(cwd, p)))];
  try {
    await repomix.pack([cwd], config, () => {}, SKIP_METRICS, files);
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
