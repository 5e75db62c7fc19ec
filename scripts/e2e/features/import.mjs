// Import torch trace…: a run made elsewhere (TORCH_TRACE) shows its findings as "imported trace",
// and Clear removes them.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { config, root } from '../harness/config.mjs';
import { sleep } from '../harness/processes.mjs';

export const importSteps = [
  {
    name: 'palette: Import torch trace… shows a run\'s findings as "imported trace", Clear removes them',
    timeout: 180_000,
    run: async (wb) => {
      // a run "made elsewhere": the test program, with TORCH_TRACE, in the workspace copy
      const program = path.join(wb.workspace, 'train_tiny_lm.py');
      fs.copyFileSync(path.join(root, 'tests/data/trace_programs/train_tiny_lm.py'), program);
      const traceDir = path.join(wb.tmp, 'torch-trace');
      const ran = spawnSync(config.interpreter, [program, '--backend', 'eager', '--steps', '6'], {
        env: { ...process.env, TORCH_TRACE: traceDir, OMP_NUM_THREADS: '1' }, encoding: 'utf8', timeout: 120_000,
      });
      if (ran.status !== 0) {
        throw new Error(`the traced run failed: ${(ran.stderr || '').slice(-400)}`);
      }
      const log = path.join(traceDir, fs.readdirSync(traceDir).find((n) => n.endsWith('.log')));
      // the palette, by hand: the file dialog opens in the same quick input, which never hides between
      const page = wb.page;
      await page.keyboard.press('Escape');
      await page.keyboard.press('F1');
      const input = page.locator('.quick-input-widget input');
      await input.waitFor({ state: 'visible', timeout: 10_000 });
      await input.fill('>Compile Lens: Import torch trace');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Import torch trace' }).first().click();
      const deadline = Date.now() + 15_000;  // the workbench's own file dialog: its value is a folder path
      while (Date.now() < deadline && !(await input.inputValue()).startsWith('/')) {
        await sleep(200);
      }
      // the dialog may set its value once more when the folder's listing arrives: type the path
      // until it stays, then accept
      const typed = Date.now() + 15_000;
      do {
        await input.fill(log);
        await sleep(500);
      } while (Date.now() < typed && (await input.inputValue()) !== log);
      await page.keyboard.press('Enter');
      await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 15_000 });
      await wb.showProblems();
      const imported = (rows) => rows.filter((row) => /imported trace/.test(row) && /train_tiny_lm|GB\d{4}/.test(row));
      const texts = await wb.waitForProblems((rows) => imported(rows).length > 0, 30_000, 'an imported-trace row');
      const row = imported(texts)[0].replace(/\s+/g, ' ');
      const shot = await wb.screenshot('6-imported-trace');
      await wb.runCommand('Compile Lens: Clear imported trace');
      await wb.waitForProblems((rows) => imported(rows).length === 0, 15_000, 'no imported-trace row after Clear');
      return `"${row.slice(0, 160)}", ${shot}`;
    },
  },
];
