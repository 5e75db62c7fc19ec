// A shared GPU box: a background measurement waits while another process uses the GPU, and
// "Measure anyway" lets it go.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { config } from '../harness/config.mjs';
import { children } from '../harness/processes.mjs';


/**
 * A training run on the GPU, as the server would see it through NVML: a real process started as
 * `python train.py` (it only sleeps; this machine has no GPU) and a readings file that says it
 * holds GPU 0 at 92% (`COMPILE_LENS_GPU_READINGS`, which stands in for NVML; docs/architecture.md, Development).
 */
export function busyGpu() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'compile-lens-e2e-gpu-'));
  const train = path.join(dir, 'train.py');
  fs.writeFileSync(train, 'import time\ntime.sleep(1800)\n');
  const child = spawn(config.interpreter, [train], { detached: true, stdio: 'ignore' });
  children.add(child);
  const readings = path.join(dir, 'gpu.json');
  fs.writeFileSync(readings, JSON.stringify({ gpus: [{ index: 0, uuid: 'GPU-e2e', utilization: 92, pids: [child.pid] }] }));
  return readings;
}


export const gpuBusySteps = [
  {
    name: `opens ${config.measureFile}: the status item and the lens say the measurement waits, and for whom`,
    required: true,
    timeout: config.analysisTimeout + 60_000,
    run: async (wb) => {
      await wb.openFile(config.measureFile);
      const lens = await wb.waitForCodeLens(/⏸ waiting: GPU busy/, config.analysisTimeout);
      if (!lens.includes('⏸ waiting: GPU busy (python train.py, 92%) · measure anyway')) {
        throw new Error(`the waiting lens reads "${lens}"`);
      }
      const text = await wb.languageStatusText(/Compile Lens: waiting: GPU busy/, 30_000);
      if (!text.includes('Compile Lens: waiting: GPU busy (python train.py, 92%)') || !text.includes('Measure anyway')) {
        throw new Error(`the status item reads "${text}"`);
      }
      await wb.page.keyboard.press('Escape');
      const shot = await wb.screenshot('1-waiting');
      return `"${lens}", "${text.slice(0, 100)}", ${shot}`;
    },
  },
  {
    name: 'palette: Compile Lens: Measure anyway starts the measurement',
    timeout: 90_000,
    run: async (wb) => {
      await wb.page.locator('.monaco-editor .view-lines').first().click();
      await wb.runCommand('Compile Lens: Measure anyway');
      await wb.waitForLog(/asked to measure anyway/, 1, 30_000);
      const lens = await wb.waitForCodeLens(/⏳ measuring|⚡ torch\.compile:/, 60_000);
      return `"${lens}"`;
    },
  },
];
