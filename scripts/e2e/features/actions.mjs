// Code actions: the light bulb's "Wrap in torch.compile" edits the line.
import { sleep } from '../harness/processes.mjs';
import { oneLine } from '../harness/workbench.mjs';

async function wrapInTorchCompile(wb) {
  const page = wb.page;
  await page.keyboard.press('Escape');
  await page.mouse.move(5, 450); // away from any hover
  const box = await wb.wordBox('plain = Tiny()', 'Tiny');
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  const menu = page.locator('.action-widget:visible').first();
  const action = menu.locator('.monaco-list-row', { hasText: 'Wrap in torch.compile' }).first();
  let shown = false;
  for (let attempt = 0; attempt < 4 && !shown; attempt += 1) {
    await page.keyboard.press('Control+Period');
    shown = await action
      .waitFor({ state: 'visible', timeout: 5000 })
      .then(() => true)
      .catch(() => false);
    if (!shown) {
      await page.keyboard.press('Escape');
      await sleep(1000);
    }
  }
  if (!shown) {
    const texts = await page.locator('.action-widget').allInnerTexts();
    throw new Error(`no "Wrap in torch.compile" in the Quick Fix menu: ${JSON.stringify(texts)}`);
  }
  const title = oneLine(await action.innerText());
  const shot = await wb.screenshot('code-actions');
  await action.click();
  await menu.waitFor({ state: 'hidden', timeout: 10_000 });
  const edited = wb.viewLine('plain = torch.compile(Tiny())');
  await edited.waitFor({ state: 'visible', timeout: 15_000 });
  return `"${title}" → "${oneLine(await edited.innerText())}", ${shot}`;
}

export const actionSteps = [
  {
    name: 'light bulb on `plain = Tiny()`: "Wrap in torch.compile" edits the line',
    run: wrapInTorchCompile,
  },
];
