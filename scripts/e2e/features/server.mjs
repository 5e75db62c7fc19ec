// The server seen from the workbench: the status item, palette commands that reach it (Analyze
// Current File, Show Output), and Clear Cache then Restart Server bringing it back.
import { sleep } from '../harness/processes.mjs';

export const serverSteps = [
  {
    name: 'status item shows the server state and torch',
    run: async (wb) => {
      const text = await wb.languageStatusText(/Compile Lens: (idle|tracing|benchmarking)[^]*torch/);
      const shot = await wb.screenshot('4-status');
      return `"${text.slice(0, 140)}", ${shot}`;
    },
  },
  {
    name: 'palette: Analyze Current File reaches the server, Show Output shows its log',
    run: async (wb) => {
      const page = wb.page;
      const failed = /workspace\/executeCommand failed|command '[^']+' not found/;
      const before = (wb.extensionLogText().match(new RegExp(failed, 'g')) ?? []).length;
      await page.locator('.monaco-editor .view-lines').first().click();
      await wb.runCommand('Compile Lens: Analyze Current File');
      await sleep(2000);
      const toasts = await page.locator('.notifications-toasts').allInnerTexts();
      const bad = toasts.find((text) => /not found|failed|error/i.test(text));
      if (bad) {
        throw new Error(`notification after Analyze Current File: "${bad}"`);
      }
      const log = wb.extensionLogText();
      const after = (log.match(new RegExp(failed, 'g')) ?? []).length;
      if (after > before) {
        throw new Error(`the server rejected compileLens.analyzeFile: ${log.slice(-600)}`);
      }
      if (!/-m compile_lens/.test(log)) {
        throw new Error(`the Compile Lens log does not show the server start: "${log.slice(0, 300)}"`);
      }
      await wb.runCommand('Compile Lens: Show Output');
      const output = page.locator('.output-view .view-lines, .panel .output .view-lines').first();
      await output.waitFor({ state: 'visible', timeout: 10_000 });
      const deadline = Date.now() + 10_000;
      let text = '';
      while (Date.now() < deadline && !/\[(info|warning|error|debug|trace)\]/.test(text)) {
        text = await output.innerText();
        await sleep(300);
      }
      if (!/\[(info|warning|error|debug|trace)\]/.test(text)) {
        throw new Error(`the Output panel does not show the Compile Lens log: "${text.slice(0, 300)}"`);
      }
      return wb.screenshot('5-output');
    },
  },
  {
    name: 'palette: Clear Cache, then Restart Server brings the server back with its commands',
    timeout: 90_000,
    run: async (wb) => {
      const failed = /workspace\/executeCommand failed|command '[^']+' not found/;
      const inits = /compile-lens \S+: root /;
      const failuresBefore = wb.countInLog(failed);
      await wb.runCommand('Compile Lens: Clear Cache');
      await sleep(1500);
      const started = wb.countInLog(inits);
      await wb.runCommand('Compile Lens: Restart Server');
      await wb.waitForLog(/restarting the server: command/, 1, 10_000);
      await wb.waitForLog(inits, started + 1, 30_000);
      const text = await wb.languageStatusText(/Compile Lens: (idle|tracing|starting)/, 30_000);
      await wb.page.keyboard.press('Escape');
      await wb.page.locator('.monaco-editor .view-lines').first().click();
      await wb.runCommand('Compile Lens: Analyze Current File');
      await sleep(1500);
      const bad = (await wb.toasts()).find((toast) => /not found|failed|error/i.test(toast));
      if (bad) {
        throw new Error(`notification: "${bad}"`);
      }
      if (wb.countInLog(failed) > failuresBefore) {
        throw new Error(`a command failed: ${wb.extensionLogText().slice(-600)}`);
      }
      return `"${text.slice(0, 80)}"`;
    },
  },
];
