// The graphs Dynamo captured: the "⊞ N graphs captured: show" lens on a traced target opens them as a
// read-only `compile-lens:` document beside the editor, each node after the line it came from and the
// graph break between the graphs.
import { sleep } from '../harness/processes.mjs';
import { oneLine } from '../harness/workbench.mjs';

async function capturedGraphShown(wb) {
  const page = wb.page;
  const lens = await wb.waitForCodeLens(/⊞ \d+ graphs? captured/, 60_000);
  await wb.editor().locator('.codelens-decoration a', { hasText: '⊞' }).first().click({ timeout: 10_000 });
  const tab = page.locator('.tabs-container .tab', { hasText: 'graphs.py' }).first();
  await tab.waitFor({ state: 'visible', timeout: 20_000 });
  const editor = page.locator('.editor-group-container.active .monaco-editor .view-lines').first();
  const deadline = Date.now() + 20_000;
  let text = '';
  while (Date.now() < deadline && !/graph break at/.test(text)) {
    text = oneLine(await editor.innerText().catch(() => ''));
    await sleep(300);
  }
  for (const wanted of ['graph 1 of 2', 'graph break at item_scale.py:', 'graph 2 of 2']) {
    if (!text.includes(wanted)) {
      throw new Error(`the graphs document lacks "${wanted}": "${text.slice(0, 400)}"`);
    }
  }
  const shot = await wb.screenshot('captured-graph');
  await tab.click({ button: 'middle' }); // closed: the next steps work in the example's editor
  await tab.waitFor({ state: 'detached', timeout: 10_000 });
  return `"${lens}" → "${(await tab.innerText().catch(() => 'graphs.py')).trim() || 'graphs.py'}", ${shot}`;
}

export const graphSteps = [
  { name: 'the "⊞ graphs captured" lens opens the graphs Dynamo captured, the break between them', run: capturedGraphShown },
];
