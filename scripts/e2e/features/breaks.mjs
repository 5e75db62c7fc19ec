// Graph breaks: the file opens, a GB diagnostic in the Problems panel, its squiggle in the editor,
// and the hover that explains it. The steps share the break they found through `state`.
import { config } from '../harness/config.mjs';

async function openExample(wb) {
  await wb.openFile(config.file);
  return config.file;
}

/** Opens the example with a graph break: the first step of a scenario that looks at breaks. */
export const openStep = { name: `opens ${config.file}`, required: true, run: openExample };

export const breakSteps = [
  {
    name: 'Problems panel lists a GB diagnostic from Compile Lens',
    required: true,
    timeout: config.analysisTimeout + 20_000,
    run: async (wb, state) => {
      await wb.showProblems();
      const texts = await wb.waitForProblems(
        (rows) => rows.some((row) => /\bGB\d{4}\b/.test(row)),
        config.analysisTimeout,
        'a GB row',
      );
      state.gbRow = texts.find((row) => /\bGB\d{4}\b/.test(row)).replace(/\s+/g, ' ');
      if (!state.gbRow.includes('Compile Lens')) {
        throw new Error(`the GB row does not name the source "Compile Lens": ${state.gbRow}`);
      }
      const position = /\[Ln (\d+), Col (\d+)\]/.exec(state.gbRow);
      if (!position) {
        throw new Error(`no [Ln, Col] in the GB row: ${state.gbRow}`);
      }
      state.gbCode = /\bGB\d{4}\b/.exec(state.gbRow)[0];
      state.gbLine = Number(position[1]);
      const shot = await wb.screenshot('1-problems');
      return `"${state.gbRow.slice(0, 140)}", ${shot}`;
    },
  },
  {
    name: 'graph-break squiggle on that line in the editor',
    required: true,
    run: async (wb, state) => {
      const box = await wb.squiggleOnLine(state.gbLine, 20_000);
      state.squiggle = box;
      const shot = await wb.screenshot('2-squiggle');
      return `line ${state.gbLine}, ${shot}`;
    },
  },
  {
    name: 'hover on the squiggle explains the graph break',
    run: async (wb, state) => {
      const page = wb.page;
      const box = state.squiggle;
      const hover = page.locator('.monaco-hover:visible', { hasText: state.gbCode }).first();
      let shown = false;
      for (let attempt = 0; attempt < 5 && !shown; attempt += 1) {
        await page.mouse.move(box.x + 2, box.y - 40);
        await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2 - 3, { steps: 4 });
        shown = await hover
          .waitFor({ state: 'visible', timeout: 3000 })
          .then(() => true)
          .catch(() => false);
      }
      if (!shown) {
        throw new Error(`no hover with ${state.gbCode} over the squiggle`);
      }
      const text = (await hover.innerText()).replace(/\s+/g, ' ').trim();
      if (!/Compile Lens/.test(text)) {
        throw new Error(`hover does not name Compile Lens: "${text}"`);
      }
      const shot = await wb.screenshot('3-hover');
      return `"${text.slice(0, 140)}", ${shot}`;
    },
  },
];
