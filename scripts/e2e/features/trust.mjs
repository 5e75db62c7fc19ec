// Workspace trust: an untrusted folder is in Restricted Mode, the server runs static lints only,
// and granting trust restarts it into full analysis.
import { config } from '../harness/config.mjs';
import { sleep } from '../harness/processes.mjs';

export const restrictedSteps = [
  {
    name: 'the window is in Restricted Mode',
    run: async (wb) => {
      await wb.page
        .locator('.monaco-workbench', { hasText: 'Restricted Mode' })
        .first()
        .waitFor({ state: 'visible', timeout: 20_000 });
    },
  },
];

export const trustSteps = [
  {
    name: 'status item says restricted',
    timeout: 90_000,
    run: async (wb) => {
      const text = await wb.languageStatusText(/Compile Lens: restricted/, 80_000);
      const shot = await wb.screenshot('1-status');
      await wb.page.keyboard.press('Escape');
      return `"${text.slice(0, 140)}", ${shot}`;
    },
  },
  {
    name: 'only CL static lints, no GB diagnostics',
    timeout: 90_000,
    run: async (wb) => {
      await wb.showProblems();
      await wb.waitForProblems(
        (rows) => rows.some((row) => /\bCL\d{3}\b/.test(row)),
        60_000,
        'a CL row',
      );
      await sleep(5000); // anything the server would wrongly run has had time to report
      const rows = (await wb.problemRows().allInnerTexts()).filter((row) =>
        /\b(GB\d{4}|CL\d{3})\b/.test(row),
      );
      const gb = rows.filter((row) => /\bGB\d{4}\b/.test(row));
      if (gb.length) {
        throw new Error(`GB diagnostics in Restricted Mode: ${JSON.stringify(gb)}`);
      }
      const shot = await wb.screenshot('2-problems');
      return `${rows.length} diagnostic(s), all CL, ${shot}`;
    },
  },
  {
    name: 'granting trust restarts the server into full mode (GB appears)',
    timeout: config.analysisTimeout + 60_000,
    run: async (wb) => {
      const page = wb.page;
      await wb.runCommand('Workspaces: Manage Workspace Trust');
      const trustButton = page
        .locator('.workspace-trust-editor .monaco-button', { hasText: /^\s*Trust\b/ })
        .first();
      await trustButton.waitFor({ state: 'visible', timeout: 15_000 });
      await trustButton.click();
      await page
        .locator('.monaco-workbench', { hasText: 'Restricted Mode' })
        .first()
        .waitFor({ state: 'detached', timeout: 15_000 })
        .catch(() => undefined);
      await wb.openFile(config.file);
      await wb.showProblems();
      const rows = await wb.waitForProblems(
        (texts) => texts.some((row) => /\bGB\d{4}\b/.test(row)),
        config.analysisTimeout,
        'a GB row after granting trust',
      );
      const log = wb.extensionLogText();
      if (!/restarting the server: workspace trusted/.test(log)) {
        throw new Error('the log does not show the restart on trust');
      }
      const shot = await wb.screenshot('3-trusted');
      return `${rows.filter((row) => /\bGB\d{4}\b/.test(row)).length} GB row(s), ${shot}`;
    },
  },
];
