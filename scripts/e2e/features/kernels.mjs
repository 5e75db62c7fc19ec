// The code behind a measured line: its hover links "Show the kernels behind this line", which opens a
// read-only `compile-lens:` document beside the editor with the line's kernels and their source.
import { sleep } from '../harness/processes.mjs';
import { oneLine } from '../harness/workbench.mjs';

const LINE = 'return torch.relu(self.fc(x))';

async function kernelsShown(wb, state) {
  if (!state.measuredLens) {
    throw new Error('nothing was measured');
  }
  const page = wb.page;
  const box = await wb.wordBox(LINE, 'relu');
  const link = page.locator('.monaco-hover:visible a', { hasText: 'Show the kernels behind this line' }).first();
  let shown = false;
  for (let attempt = 0; attempt < 6 && !shown; attempt += 1) {
    await page.keyboard.press('Escape');
    await page.mouse.move(box.x + box.width / 2, box.y - 60);
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2, { steps: 4 });
    shown = await link.waitFor({ state: 'visible', timeout: 4000 }).then(() => true, () => false);
  }
  if (!shown) {
    throw new Error(`no "Show the kernels behind this line" link in the hover of "${LINE}"`);
  }
  await link.click();
  const tab = page.locator('.tabs-container .tab', { hasText: 'kernels.txt' }).first();
  await tab.waitFor({ state: 'visible', timeout: 20_000 });
  const editor = page.locator('.editor-group-container.active .monaco-editor .view-lines').first();
  const deadline = Date.now() + 20_000;
  let text = '';
  while (Date.now() < deadline && !/the kernels this line became/.test(text)) {
    text = oneLine(await editor.innerText().catch(() => ''));
    await sleep(300);
  }
  for (const wanted of ['the kernels this line became', 'extern_kernels.addmm']) {
    if (!text.includes(wanted)) {
      throw new Error(`the kernels document lacks "${wanted}": "${text.slice(0, 400)}"`);
    }
  }
  const shot = await wb.screenshot('kernels');
  await tab.click({ button: 'middle' });
  await tab.waitFor({ state: 'detached', timeout: 10_000 });
  return `"${text.slice(0, 120)}", ${shot}`;
}

export const kernelSteps = [
  { name: 'a measured line\'s hover opens the kernels behind it, with their source', run: kernelsShown },
];
