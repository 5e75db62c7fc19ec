// What a run is given: the tools' paths (from scripts/e2e/run.sh) and the knobs (environment).
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`e2e: ${name} is not set (run scripts/e2e/run.sh)`);
    process.exit(2);
  }
  return value;
}

export const config = {
  node: need('E2E_NODE24'),
  codeServer: need('E2E_CODE_SERVER'),
  playwright: need('E2E_PLAYWRIGHT_DIR'),
  vsix: need('E2E_VSIX'),
  chromium: process.env.E2E_CHROMIUM || '/usr/bin/chromium',
  workspace: path.resolve(root, process.env.E2E_WORKSPACE || 'examples'),
  /** A file in the workspace whose diagnostics include a graph break (GB code). */
  file: process.env.E2E_FILE || 'item_scale.py',
  /** A file with a small model that measures quickly, `model = torch.compile(Tiny())` and `plain = Tiny()`. */
  measureFile: process.env.E2E_MEASURE_FILE || 'tiny_measure.py',
  /** Seconds to wait for a measurement (trace, cold and warm Inductor compiles, timings). */
  measureTimeout: Number(process.env.E2E_MEASURE_TIMEOUT_S || 180) * 1000,
  interpreter: path.resolve(root, process.env.E2E_INTERPRETER || '.venv/bin/python'),
  out: path.resolve(root, process.env.E2E_OUT || 'build/e2e'),
  /** Seconds to wait for the first graph-break diagnostic (worker start + torch import + trace). */
  analysisTimeout: Number(process.env.E2E_ANALYSIS_TIMEOUT_S || 180) * 1000,
  /** Seconds the whole run may take before it is stopped as failed. */
  totalTimeout: Number(process.env.E2E_TIMEOUT_S || 900) * 1000,
  /** Comma-separated scenario names to run (default: all). */
  only: (process.env.E2E_ONLY || '').split(',').filter(Boolean),
};
