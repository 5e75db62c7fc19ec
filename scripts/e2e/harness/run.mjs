// Running scenarios: each step in order, timed and recorded under its feature; a failed step
// leaves its screenshot (SCENARIO-fail-FEATURE-STEP.png) and a failed `required` one skips the rest.
import * as path from 'node:path';

import { config, root } from './config.mjs';
import { killAllNow, withTimeout } from './processes.mjs';
import { Workbench } from './workbench.mjs';

/** `steps` as steps of `feature` (the file they come from: breaks, measure, actions, …). */
export function feature(name, steps) {
  return steps.map((step) => ({ ...step, feature: name }));
}

/** A step for the end of a scenario: the extension's log shows no failed request or crash. */
export const cleanLogStep = {
  feature: 'log',
  name: 'the Compile Lens log has no failed requests or tracebacks',
  run: async (wb) => {
    const bad =
      /Request \S+ failed|Traceback \(most recent call last\)|Client is not running|couldn't create connection|Connection to server got closed|Server initialization failed/;
    const lines = wb.extensionLogText().split('\n');
    const hits = lines.flatMap((line, index) => (bad.test(line) ? [index] : []));
    if (hits.length) {
      const first = lines.slice(hits[0], hits[0] + 3).join(' | ');
      throw new Error(`${hits.length} problem line(s) in the log, first: ${first.slice(0, 300)}`);
    }
    return `${lines.length} lines`;
  },
};

const results = [];

export function record(scenario, name, ok, detail) {
  results.push({ scenario, name, ok, detail });
  const mark = ok ? 'ok  ' : 'FAIL';
  console.log(`${mark} ${scenario}: ${name}${detail ? ` — ${detail}` : ''}`);
}

const startStep = {
  feature: 'workbench',
  name: 'workbench loads',
  required: true,
  run: async (wb) => {
    await wb.start();
    await wb.page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
    await wb.page
      .locator('.explorer-folders-view .monaco-list-row')
      .first()
      .waitFor({ state: 'visible', timeout: 60_000 });
    await wb.page.locator('.monaco-workbench').click({ position: { x: 700, y: 450 } }).catch(() => {});
    return `code-server on 127.0.0.1:${wb.port}`;
  },
};

export async function runScenario(scenario) {
  if (config.only.length && !config.only.includes(scenario.name)) {
    return;
  }
  console.log(`e2e: scenario ${scenario.name} (${scenario.description})`);
  const wb = new Workbench(scenario.name, scenario.options);
  const state = {};
  let blocked;
  try {
    for (const step of [startStep, ...scenario.steps]) {
      const name = `[${step.feature}] ${step.name}`;
      if (blocked) {
        record(scenario.name, name, false, `not run: "${blocked}" failed`);
        continue;
      }
      const started = Date.now();
      try {
        const detail = await withTimeout(Promise.resolve(step.run(wb, state)), step.timeout ?? 60_000, name);
        const seconds = ((Date.now() - started) / 1000).toFixed(1);
        record(scenario.name, name, true, [detail, `${seconds}s`].filter(Boolean).join(', '));
      } catch (err) {
        // where in these scripts it failed: the first lines of the stack that are ours
        const at = [...new Set((err.stack || '').match(/[\w-]+\.mjs:\d+/g) || [])].slice(0, 3).join(' ← ');
        record(scenario.name, name, false, err.message.split('\n')[0].slice(0, 400) + (at ? ` (at ${at})` : ''));
        if (wb.page) {
          await wb.screenshot(`fail-${step.feature}-${slug(step.name)}`).catch(() => undefined);
        }
        if (step.required) {
          blocked = name;
        }
      }
    }
  } finally {
    await wb.stop();
  }
}

function slug(text) {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

export function finish(started) {
  const passed = results.filter((r) => r.ok).length;
  const failed = results.length - passed;
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  console.log(`e2e: screenshots and logs in ${path.relative(root, config.out)}/ (${seconds}s)`);
  console.log(`e2e: ${passed} passed, ${failed} failed`);
  killAllNow();
  process.exit(failed || passed === 0 ? 1 : 0);
}
