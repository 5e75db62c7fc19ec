// End-to-end test of the packaged extension in a real VS Code workbench (code-server), driven
// in Debian's chromium by playwright-core. Called by scripts/e2e/run.sh, which installs the tools
// and builds the .vsix, and passes their paths in the environment (harness/config.mjs).
//
// A scenario is one code-server (fresh user data and extensions dirs) and one browser; its steps
// are named checks that run in order, each from the file of its feature (features/: breaks,
// graphs, server, import, measure, kernels, actions, trust, gpu_busy), on one shared harness (harness/: config,
// processes, the workbench and its helpers, the runner). A failed `required` step fails the rest
// of its scenario at once instead of letting each wait run into its timeout; a failed step names
// its feature and leaves a screenshot. The workbench opens a copy of the workspace folder, so
// edits made by steps (a code action) never touch the repository.
//
// Prints `e2e: N passed, M failed` last; exits 1 on any failure. Screenshots and logs go to
// build/e2e/.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { actionSteps } from './features/actions.mjs';
import { breakSteps, openStep } from './features/breaks.mjs';
import { busyGpu, gpuBusySteps } from './features/gpu_busy.mjs';
import { graphSteps } from './features/graphs.mjs';
import { importSteps } from './features/import.mjs';
import { kernelSteps } from './features/kernels.mjs';
import { measureSteps } from './features/measure.mjs';
import { serverSteps } from './features/server.mjs';
import { restrictedSteps, trustSteps } from './features/trust.mjs';
import { config, root } from './harness/config.mjs';
import { cleanLogStep, feature, finish, record, runScenario } from './harness/run.mjs';

const trusted = {
  name: 'trusted',
  description: 'workspace trust off: full analysis',
  options: { trust: false },
  steps: [
    ...feature('breaks', [openStep, ...breakSteps]),
    ...feature('graphs', graphSteps),
    ...feature('server', serverSteps),
    ...feature('import', importSteps),
    ...feature('measure', measureSteps),
    ...feature('kernels', kernelSteps),
    ...feature('actions', actionSteps),
    cleanLogStep,
  ],
};

const restricted = {
  name: 'restricted',
  description: 'workspace trust on, folder not trusted: static lints only',
  options: { trust: true },
  steps: [
    ...feature('trust', restrictedSteps),
    ...feature('breaks', [openStep]),
    ...feature('trust', trustSteps),
    cleanLogStep,
  ],
};

const gpuBusy = {
  name: 'gpu-busy',
  description: 'a shared GPU box: the background measurement waits for another process, Measure anyway lets it go',
  options: { trust: false, settings: { 'compileLens.benchmark.onSave': true } },
  steps: [...feature('gpu-busy', gpuBusySteps), cleanLogStep],
};

async function main() {
  const started = Date.now();
  fs.rmSync(config.out, { recursive: true, force: true });
  fs.mkdirSync(config.out, { recursive: true });
  if (!fs.existsSync(path.join(config.workspace, config.file))) {
    record('setup', `${config.file} exists in ${path.relative(root, config.workspace)}/`, false);
  } else {
    const watchdog = setTimeout(() => {
      record('run', 'finishes in time', false, `${config.totalTimeout / 1000}s passed`);
      finish(started);
    }, config.totalTimeout);
    for (const scenario of [trusted, restricted, gpuBusy]) {
      if (scenario === gpuBusy && (!config.only.length || config.only.includes(gpuBusy.name))) {
        gpuBusy.options.env = { COMPILE_LENS_GPU_READINGS: busyGpu() };
      }
      await runScenario(scenario);
    }
    clearTimeout(watchdog);
  }
  finish(started);
}

main().catch((err) => {
  record('run', 'harness', false, err.stack);
  finish(Date.now());
});
