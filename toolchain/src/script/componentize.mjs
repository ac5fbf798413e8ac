// Run by `skillhost skill build` under Node: builds one JavaScript script tool into a WASI
// command component with componentize-js.
// Usage: node componentize.mjs <job.json>, where the job names
//   componentize  the componentize-js package folder
//   script        the script's path as the author knows it (for messages)
//   source        the script's own file
//   entry         the generated entry module (the script wrapped in a function)
//   wit           the folder holding the script world
//   output        where to write the component
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(join(job.componentize, "package.json"));
const { parseSync } = require(require.resolve("oxc-parser"));
const { componentize } = await import(pathToFileURL(join(job.componentize, "src", "componentize.js")));

function fail(message) {
  process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}

// A script runs as a plain script: module syntax cannot be wrapped in a function.
const own = parseSync(job.script, readFileSync(job.source, "utf8"), { sourceType: "module" });
for (const error of own.errors) fail(`${job.script}: ${error.message}${error.codeframe ?? ""}`);
if (own.module.staticImports.length || own.module.staticExports.length) {
  fail(`${job.script}: a script tool is a plain script (process.argv, console.log); import and export are not supported in it`);
}
// The wrapped script keeps its line numbers, so these errors point at the author's lines.
const wrapped = parseSync(job.script, readFileSync(job.entry, "utf8"), { sourceType: "module" });
for (const error of wrapped.errors) fail(`${job.script}: ${error.message}${error.codeframe ?? ""}`);

try {
  const { component } = await componentize({
    sourcePath: job.entry,
    witPath: job.wit,
    worldName: "script",
    disableFeatures: ["http", "fetch-event"],
  });
  writeFileSync(job.output, component);
} catch (err) {
  fail(`building ${job.script} failed:\n${err?.message ?? err}`);
}
