// Bundles the client into dist/extension.js (one file, `vscode` left to the host), or, with
// --tests, each test/*.test.ts into out/test/ with `vscode` and the language client replaced by
// the stubs in test/stubs/ (Node 20 has neither mock.module nor type stripping).
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(here);
const tests = process.argv.includes('--tests');
const production = process.argv.includes('--production');

const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  sourcemap: production ? false : 'linked',
  logLevel: 'warning',
};

if (tests) {
  const testDir = path.join(here, 'test');
  const outdir = path.join(here, 'out', 'test');
  fs.rmSync(outdir, { recursive: true, force: true });
  const entryPoints = fs
    .readdirSync(testDir)
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => path.join(testDir, name));
  await esbuild.build({
    ...common,
    entryPoints,
    outdir,
    sourcemap: 'inline',
    alias: {
      vscode: path.join(testDir, 'stubs', 'vscode.ts'),
      'vscode-languageclient/node': path.join(testDir, 'stubs', 'languageclient.ts'),
    },
  });
} else {
  await esbuild.build({
    ...common,
    entryPoints: [path.join(here, 'src', 'extension.ts')],
    outfile: path.join(root, 'dist', 'extension.js'),
    external: ['vscode'],
    minify: production,
  });
}
