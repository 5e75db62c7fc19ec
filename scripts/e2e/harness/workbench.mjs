// One workbench: code-server with a fresh profile and the .vsix installed, and a browser on it;
// the workbench helpers steps share (palette, files, Problems, hovers, CodeLens).
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';

import { config, root } from './config.mjs';
import { children, freePort, sleep, stopChild, waitForHttp, withTimeout } from './processes.mjs';

const { chromium } = createRequire(import.meta.url)(config.playwright);

export function oneLine(text) {
  return text.replace(/[\s\u00a0]+/g, ' ').trim();
}

export class Workbench {
  /** `env` and `settings`: a scenario's additions to the server's environment and the User settings. */
  constructor(name, { trust, env = {}, settings = {} }) {
    this.name = name;
    this.trust = trust;
    this.extraSettings = settings;
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), `compile-lens-e2e-${name}-`));
    this.userData = path.join(this.tmp, 'user-data');
    this.extensions = path.join(this.tmp, 'extensions');
    this.workspace = path.join(this.tmp, 'workspace', path.basename(config.workspace));
    this.env = {
      ...process.env,
      HOME: process.env.HOME || this.tmp,
      XDG_CONFIG_HOME: path.join(this.tmp, 'xdg-config'),
      XDG_DATA_HOME: path.join(this.tmp, 'xdg-data'),
      XDG_CACHE_HOME: path.join(this.tmp, 'xdg-cache'),
      XDG_STATE_HOME: path.join(this.tmp, 'xdg-state'),
      PATH: `${path.dirname(config.node)}:${process.env.PATH}`,
      ...env,
    };
    delete this.env.VSCODE_IPC_HOOK_CLI;
  }

  writeSettings() {
    const settings = {
      'workbench.startupEditor': 'none',
      'workbench.secondarySideBar.defaultVisibility': 'hidden',
      'workbench.tips.enabled': false,
      'workbench.welcomePage.walkthroughs.openOnInstall': false,
      'workbench.enableExperiments': false,
      'chat.disableAIFeatures': true,
      'telemetry.telemetryLevel': 'off',
      'update.mode': 'none',
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'extensions.ignoreRecommendations': true,
      'editor.hover.delay': 200,
      // Below the line: a hover is as tall as the space on its side, and the model classes the
      // hover card belongs to sit near the top of their files.
      'editor.hover.above': false,
      'editor.minimap.enabled': false,
      // No animation frames while nothing changes (the cursor's blink, the progress spinners): the
      // browser composites in software here, every frame on the CPU the pytest run beside needs
      'workbench.reduceMotion': 'on',
      'editor.cursorBlinking': 'solid',
      'security.workspace.trust.startupPrompt': 'never',
      'security.workspace.trust.emptyWindow': false,
      // Measure only when asked (the CodeLens). The budget bounds the measurement from its start
      // (max(budget, time to the forward's figure) x 1.1 + 5 s): on a machine loaded by the pytest
      // run beside the e2e, the forward's figure came at 30 s and a 10 s budget left the line costs
      // (the kernels step's link) no room after it. Opted in, the parts the steps show run whatever
      // the budget; the small budget keeps the timing rounds (inconclusive on that machine) short.
      'compileLens.benchmark.onSave': false,
      'compileLens.benchmark.maxSeconds': 10,
      'compileLens.benchmark.optIn': ['train_step', 'memory', 'lines'],
      ...this.extraSettings,
    };
    // The interpreter is a path on the machine the server runs on, so it goes into the Machine
    // (in VS Code: "Remote") settings, as on a Remote GPU host. code-server's extension host is
    // remote; a machine-overridable value from the User settings there is dropped in Restricted
    // Mode and stays dropped after trust is granted, until a reload.
    const machine = { 'compileLens.interpreter': [config.interpreter] };
    for (const [folder, values] of [
      ['User', settings],
      ['Machine', machine],
    ]) {
      const dir = path.join(this.userData, folder);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'settings.json'), JSON.stringify(values, null, 2));
    }
  }

  codeServerArgs() {
    return [
      config.codeServer,
      '--user-data-dir',
      this.userData,
      '--extensions-dir',
      this.extensions,
      '--disable-telemetry',
      '--disable-update-check',
      ...(this.trust ? [] : ['--disable-workspace-trust']),
    ];
  }

  installExtension() {
    const result = spawnSync(
      config.node,
      [...this.codeServerArgs(), '--install-extension', config.vsix, '--force'],
      { env: this.env, encoding: 'utf8', timeout: 120_000 },
    );
    const output = `${result.stdout}${result.stderr}`;
    if (result.status !== 0 || !/successfully installed/i.test(output)) {
      throw new Error(`installing ${config.vsix} failed (${result.status}): ${output.slice(-2000)}`);
    }
  }

  /** The workspace folder as a fresh copy (no caches), so steps may edit its files. */
  copyWorkspace() {
    fs.cpSync(config.workspace, this.workspace, {
      recursive: true,
      filter: (src) => !/(^|[/\\])(__pycache__|\.mypy_cache|\.pytest_cache|\.venv|node_modules|\.git)$/.test(src),
    });
  }

  async start() {
    this.copyWorkspace();
    this.writeSettings();
    this.installExtension();
    this.port = await freePort();
    const log = fs.openSync(path.join(config.out, `code-server-${this.name}.log`), 'w');
    this.server = spawn(
      config.node,
      [...this.codeServerArgs(), '--bind-addr', `127.0.0.1:${this.port}`, '--auth', 'none'],
      { env: this.env, cwd: this.tmp, detached: true, stdio: ['ignore', log, log] },
    );
    children.add(this.server);
    fs.closeSync(log);
    await waitForHttp(`http://127.0.0.1:${this.port}/healthz`, 60_000);

    this.context = await chromium.launchPersistentContext(path.join(this.tmp, 'chromium'), {
      executablePath: config.chromium,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--force-prefers-reduced-motion',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-dev-shm-usage',
      ],
      timeout: 60_000,
    });
    this.page = this.context.pages()[0] ?? (await this.context.newPage());
    this.page.setDefaultTimeout(30_000);
    const url = `http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(this.workspace)}`;
    await this.page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60_000 });
  }

  async stop() {
    try {
      await withTimeout(this.context?.close() ?? Promise.resolve(), 15_000, 'closing chromium');
    } catch (err) {
      console.error(`e2e: ${err.message}`);
    }
    if (this.server) {
      await stopChild(this.server);
    }
    this.copyLogs();
    fs.rmSync(this.tmp, { recursive: true, force: true });
  }

  /** The files of the "Compile Lens" log output channel (one per extension host). */
  extensionLogs() {
    const found = [];
    const walk = (dir) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          walk(full);
        } else if (entry.name === 'Compile Lens.log') {
          found.push(full);
        }
      }
    };
    try {
      walk(path.join(this.userData, 'logs'));
    } catch {
      // no logs yet
    }
    return found.sort();
  }

  extensionLogText() {
    return this.extensionLogs()
      .map((file) => fs.readFileSync(file, 'utf8'))
      .join('\n');
  }

  /** How often `pattern` occurs in the extension's log. */
  countInLog(pattern) {
    return (this.extensionLogText().match(new RegExp(pattern.source, 'g')) ?? []).length;
  }

  async waitForLog(pattern, atLeast, ms) {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (this.countInLog(pattern) >= atLeast) {
        return;
      }
      await sleep(300);
    }
    throw new Error(`${pattern} seen ${this.countInLog(pattern)}× in the log, wanted ${atLeast}`);
  }

  /** Texts of the notification toasts on screen. */
  async toasts() {
    return this.page.locator('.notifications-toasts .notification-toast').allInnerTexts();
  }

  /** The extension's log next to the screenshots. */
  copyLogs() {
    const found = this.extensionLogs();
    for (const [index, file] of found.entries()) {
      const suffix = found.length > 1 ? `-${index + 1}` : '';
      fs.copyFileSync(file, path.join(config.out, `output-${this.name}${suffix}.log`));
    }
  }

  async screenshot(label) {
    const file = path.join(config.out, `${this.name}-${label}.png`);
    await this.page.screenshot({ path: file, timeout: 15_000 });
    return path.relative(root, file);
  }

  // --- workbench helpers -------------------------------------------------------------------

  /** Runs a command from the palette by its label ("Compile Lens: Show Output"). */
  async runCommand(label) {
    const page = this.page;
    await page.keyboard.press('Escape');
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: 10_000 });
    await input.fill(`>${label}`);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: label }).first();
    await row.waitFor({ state: 'visible', timeout: 10_000 });
    await row.click();
    await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 });
  }

  /** Opens a workspace file by name through Quick Open. */
  async openFile(name) {
    const page = this.page;
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+P');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: 10_000 });
    await input.fill(name);
    const row = page
      .locator('.quick-input-list .monaco-list-row', { hasText: path.basename(name) })
      .first();
    await row.waitFor({ state: 'visible', timeout: 20_000 });
    await page.keyboard.press('Enter');
    await page
      .locator(`.tabs-container .tab[aria-label*="${path.basename(name)}"]`)
      .first()
      .waitFor({ state: 'visible', timeout: 15_000 });
    await page.locator('.monaco-editor .view-lines').first().waitFor({ state: 'visible' });
  }

  /** The box of a warning/error squiggle on 1-based `line` of the active editor. */
  async squiggleOnLine(line, ms) {
    const page = this.page;
    const editor = page.locator('.editor-group-container.active .monaco-editor').first();
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const number = editor.locator('.margin-view-overlays .line-numbers', {
        hasText: new RegExp(`^\\s*${line}\\s*$`),
      });
      const lineBox = (await number.count()) ? await number.first().boundingBox() : null;
      if (lineBox) {
        const squiggles = editor.locator('.squiggly-warning, .squiggly-error');
        for (let i = 0; i < (await squiggles.count()); i += 1) {
          const box = await squiggles.nth(i).boundingBox();
          if (box && box.y < lineBox.y + lineBox.height && box.y + box.height > lineBox.y) {
            return box;
          }
        }
      }
      await sleep(500);
    }
    throw new Error(`no warning squiggle on line ${line} in ${ms / 1000}s`);
  }

  problemRows() {
    return this.page.locator('.markers-panel .monaco-list-row');
  }

  async showProblems() {
    await this.runCommand('View: Focus Problems');
    await this.page.locator('.markers-panel').waitFor({ state: 'visible', timeout: 10_000 });
  }

  /** Text of the Problems rows, refreshed until `predicate` holds or `ms` pass. */
  async waitForProblems(predicate, ms, what) {
    const deadline = Date.now() + ms;
    let texts = [];
    while (Date.now() < deadline) {
      texts = await this.problemRows().allInnerTexts();
      if (predicate(texts)) {
        return texts;
      }
      await sleep(500);
    }
    throw new Error(`${what} not seen in ${ms / 1000}s; Problems: ${JSON.stringify(texts)}`);
  }

  /** Opens the language status hover ({} in the status bar) and returns its text. */
  async languageStatusText(match, ms = 30_000) {
    const page = this.page;
    const deadline = Date.now() + ms;
    let text = '';
    while (Date.now() < deadline) {
      await page.keyboard.press('Escape');
      const entry = page.locator('[id="status.languageStatus"]');
      if (await entry.isVisible()) {
        await entry.click();
        const hover = page.locator('.monaco-hover:visible', { hasText: 'Compile Lens' }).first();
        try {
          await hover.waitFor({ state: 'visible', timeout: 3000 });
          text = (await hover.innerText()).replace(/\s+/g, ' ').trim();
          if (match.test(text)) {
            return text;
          }
        } catch {
          // not shown yet: try again
        }
      }
      await sleep(1000);
    }
    throw new Error(`language status ${match} not seen in ${ms / 1000}s; last: "${text}"`);
  }

  // --- the active editor: CodeLens, view lines, light bulb -------------------------------------

  editor() {
    return this.page.locator('.editor-group-container.active .monaco-editor').first();
  }

  /** The text of a CodeLens row in the active editor matching `pattern`, polled for `ms`. */
  async waitForCodeLens(pattern, ms) {
    const deadline = Date.now() + ms;
    let texts = [];
    while (Date.now() < deadline) {
      texts = (await this.editor().locator('.codelens-decoration').allInnerTexts()).map(oneLine);
      const hit = texts.find((text) => pattern.test(text));
      if (hit) {
        return hit;
      }
      await sleep(500);
    }
    throw new Error(`no CodeLens ${pattern} in ${ms / 1000}s; lenses: ${JSON.stringify(texts)}`);
  }

  /** The rendered line of the active editor that contains `text` (inlay hints included). */
  viewLine(text) {
    return this.editor().locator('.view-lines .view-line', { hasText: text }).first();
  }

  /** The on-screen box of the first `word` on the line containing `lineText`. */
  async wordBox(lineText, word) {
    const line = this.viewLine(lineText);
    await line.waitFor({ state: 'visible', timeout: 10_000 });
    const box = await line.evaluate((element, wanted) => {
      const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const at = node.textContent.indexOf(wanted);
        if (at >= 0) {
          const range = document.createRange();
          range.setStart(node, at);
          range.setEnd(node, at + wanted.length);
          const { x, y, width, height } = range.getBoundingClientRect();
          return { x, y, width, height };
        }
      }
      return null;
    }, word);
    if (!box || !box.width) {
      throw new Error(`"${word}" not found on the line "${lineText}"`);
    }
    return box;
  }
}
