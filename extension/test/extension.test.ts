// The wiring in activate(): trust, restarts, settings pushes, status and commands.
import * as assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { activate, deactivate, RESTART_DEBOUNCE_MS } from '../src/extension';
import { fakeContext, installPythonExtension, packageJSON, resetStubs, settle } from './helpers';
import { clients, LanguageClient } from './stubs/languageclient';
import { LanguageStatusSeverity, stub, Uri, window, workspace } from './stubs/vscode';

let context: ReturnType<typeof fakeContext>;

async function start(): Promise<void> {
  context = fakeContext();
  await activate(context as never);
}

const last = () => clients[clients.length - 1];
const running = () => clients.filter((client) => client.isRunning());

describe('workspace trust', () => {
  beforeEach(resetStubs);
  afterEach(async () => {
    await deactivate();
    context.disposeAll();
  });

  test('a trusted workspace starts the server with trusted: true', async () => {
    await start();
    assert.equal(clients.length, 1);
    assert.equal(last().clientOptions.initializationOptions.trusted, true);
  });

  test('Restricted Mode starts the server with trusted: false', async () => {
    workspace.isTrusted = false;
    await start();
    assert.equal(clients.length, 1);
    assert.equal(last().clientOptions.initializationOptions.trusted, false);
    assert.ok(last().isRunning(), 'static lints still run');
  });

  test('granting trust restarts the server in full mode', async () => {
    workspace.isTrusted = false;
    await start();
    const restricted = last();
    workspace.isTrusted = true;
    stub.grantTrust.fire();
    await settle(10);
    assert.equal(clients.length, 2);
    assert.ok(restricted.disposed);
    assert.equal(last().clientOptions.initializationOptions.trusted, true);
    assert.deepEqual(running(), [last()]);
  });
});

describe('server start and restart', () => {
  beforeEach(resetStubs);
  afterEach(async () => {
    await deactivate();
    context.disposeAll();
  });

  test('the server runs as <python> -m compile_lens over stdio, with settings', async () => {
    stub.config['compileLens.interpreter'] = ['/venv/bin/python'];
    await start();
    const { serverOptions, clientOptions } = last();
    assert.equal(serverOptions.command, '/venv/bin/python');
    assert.deepEqual(serverOptions.args, ['-m', 'compile_lens']);
    assert.equal(serverOptions.transport, undefined);
    assert.equal(serverOptions.options.env.PYTHONSAFEPATH, '1');
    assert.equal(clientOptions.initializationOptions.settings['worker.timeoutSeconds'], 60);
    assert.equal(clientOptions.outputChannel.name, 'Compile Lens');
  });

  test('an interpreter change restarts only when the command really changed', async () => {
    stub.config['compileLens.interpreter'] = ['/a/python'];
    await start();
    stub.changeConfig({ 'compileLens.interpreter': ['/a/python'] });
    await settle(RESTART_DEBOUNCE_MS + 100);
    assert.equal(clients.length, 1, 'same command: no restart');

    stub.changeConfig({ 'compileLens.interpreter': ['/b/python'] });
    stub.changeConfig({ 'compileLens.interpreter': ['/c/python'] });
    await settle(RESTART_DEBOUNCE_MS + 100);
    assert.equal(clients.length, 2, 'debounced: one restart for a burst');
    assert.equal(last().serverOptions.command, '/c/python');
    assert.deepEqual(running(), [last()]);
  });

  test('a new Python extension interpreter restarts the server', async () => {
    const python = installPythonExtension('/envs/one/bin/python');
    await start();
    assert.equal(last().serverOptions.command, '/envs/one/bin/python');
    python.select('/envs/two/bin/python');
    await settle(RESTART_DEBOUNCE_MS + 100);
    assert.equal(last().serverOptions.command, '/envs/two/bin/python');
    assert.equal(running().length, 1);
  });

  test('other settings changes are pushed as one flat settings object', async () => {
    await start();
    stub.changeConfig({ 'compileLens.device': 'cpu' });
    await settle(10);
    assert.equal(clients.length, 1);
    const sent = last().sent.filter((n) => n.method === 'workspace/didChangeConfiguration');
    assert.equal(sent.length, 1);
    const { settings } = sent[0].params as { settings: Record<string, unknown> };
    assert.equal(settings.device, 'cpu');
    assert.equal(settings['benchmark.mode'], 'default');
  });

  test('compileLens.restartServer always restarts', async () => {
    await start();
    await stub.registered.get('compileLens.restartServer')?.();
    assert.equal(clients.length, 2);
    assert.equal(running().length, 1);
  });

  test('the commands it runs itself are registered and declared to the server (clientCommands)', async () => {
    await start();
    const declared: string[] = last().clientOptions.initializationOptions.clientCommands;
    assert.deepEqual(declared, ['compileLens.showOutput', 'compileLens.showReport', 'compileLens.showCapturedGraph', 'compileLens.showKernels']);
    for (const command of declared) {
      assert.ok(stub.registered.has(command), command);
    }
  });

  test('server commands are left to the language client (no double registration)', async () => {
    await start();
    assert.ok(stub.registered.has('compileLens.showOutput'));
    assert.ok(!stub.registered.has('compileLens.analyzeFile'));
    assert.ok(!stub.registered.has('compileLens.clearCache'));
  });

  test('analyzeFile from the palette gets the active editor uri', async () => {
    await start();
    const uri = Uri.file('/work/project/net.py');
    window.activeTextEditor = { document: { uri } };
    const middleware = last().clientOptions.middleware;
    const calls: unknown[][] = [];
    await middleware.executeCommand('compileLens.analyzeFile', [], (_c: string, args: unknown[]) => {
      calls.push(args);
    });
    assert.deepEqual(calls, [[uri.toString()]]);
  });

  test('a command the server declines says why', async () => {
    await start();
    window.activeTextEditor = { document: { uri: Uri.file('/work/project/net.py') } };
    const middleware = last().clientOptions.middleware;
    const result = await middleware.executeCommand('compileLens.analyzeFile', [], async () => ({
      started: false,
      reason: 'untrusted workspace: no code is run',
    }));
    assert.deepEqual(result, { started: false, reason: 'untrusted workspace: no code is run' });
    assert.deepEqual(stub.messages.at(-1), {
      level: 'info',
      text: 'Compile Lens: untrusted workspace: no code is run',
      items: [],
    });
  });

  test('Measure anyway is sent as it is (no file), and a refusal is said', async () => {
    await start();
    window.activeTextEditor = { document: { uri: Uri.file('/work/project/net.py') } };
    const middleware = last().clientOptions.middleware;
    const calls: unknown[][] = [];
    await middleware.executeCommand('compileLens.measureAnyway', [], async (_c: string, args: unknown[]) => {
      calls.push(args);
      return { started: false, reason: 'no measurement is waiting for the GPU' };
    });
    assert.deepEqual(calls, [[]]);
    assert.equal(stub.messages.at(-1)?.text, 'Compile Lens: no measurement is waiting for the GPU');
  });

  test('package.json declares a workspace extension and every command the client names', () => {
    // Remote-SSH: the extension (and so the server and its workers) runs where the files and GPU are
    assert.deepEqual(packageJSON.extensionKind, ['workspace']);
    const declared = new Set(packageJSON.contributes.commands.map((c: { command: string }) => c.command));
    for (const command of [
      'compileLens.analyzeFile', 'compileLens.measureAnyway', 'compileLens.clearCache', 'compileLens.saveTrace',
      'compileLens.restartServer', 'compileLens.showOutput', 'compileLens.showReport',
    ]) {
      assert.ok(declared.has(command), command);
    }
  });

  test('a server that cannot start shows an error status', async () => {
    LanguageClient.failNextStart = new Error('spawn python3 ENOENT');
    await start();
    const item = stub.statusItems[0];
    assert.equal(item.severity, LanguageStatusSeverity.Error);
    assert.match(item.text, /error/);
  });
});

describe('status item', () => {
  beforeEach(resetStubs);
  afterEach(async () => {
    await deactivate();
    context.disposeAll();
  });

  test('compileLens/status notifications drive the language status item', async () => {
    await start();
    const item = stub.statusItems[0];
    assert.equal(item.id, 'compileLens.status');
    assert.deepEqual(item.selector, { language: 'python' });
    last().emit('compileLens/status', {
      state: 'tracing',
      detail: 'Net',
      torch: '2.13.0+cpu',
      device: 'cpu',
      interpreter: '/venv/bin/python',
    });
    assert.equal(item.text, 'Compile Lens: tracing Net');
    assert.equal(item.detail, 'torch 2.13.0+cpu · cpu');
    assert.equal(item.busy, true);
    last().emit('compileLens/status', { state: 'idle', detail: '', torch: '2.13.0+cpu', device: 'cpu' });
    assert.equal(item.text, 'Compile Lens: idle');
    assert.equal(item.busy, false);
    last().emit('compileLens/status', { state: 'error', detail: 'worker crashed' });
    assert.equal(item.severity, LanguageStatusSeverity.Error);
    assert.equal(item.detail, 'worker crashed');
  });

  test('while a measurement waits for a busy GPU, the item says who and links Measure anyway', async () => {
    await start();
    const item = stub.statusItems[0];
    assert.deepEqual(item.command, { title: 'Show Output', command: 'compileLens.showOutput' });
    last().emit('compileLens/status', { state: 'waiting', detail: 'GPU busy (python train.py, 92%)', device: 'cuda' });
    assert.equal(item.text, 'Compile Lens: waiting: GPU busy (python train.py, 92%)');
    assert.deepEqual(item.command, { title: 'Measure anyway', command: 'compileLens.measureAnyway' });
    assert.equal(item.severity, LanguageStatusSeverity.Information);
    last().emit('compileLens/status', { state: 'benchmarking', detail: 'compiling Tiny', device: 'cuda' });
    assert.deepEqual(item.command, { title: 'Show Output', command: 'compileLens.showOutput' });
  });

  test('no-torch shows one notification that offers another interpreter', async () => {
    await start();
    stub.nextChoice = 'Select Interpreter';
    const params = { state: 'no-torch', detail: '', torch: null, device: null, interpreter: '/usr/bin/python3' };
    last().emit('compileLens/status', params);
    last().emit('compileLens/status', { ...params, state: 'starting' });
    last().emit('compileLens/status', params);
    await settle(10);
    const errors = stub.messages.filter((m) => m.level === 'error');
    assert.equal(errors.length, 1);
    assert.equal(
      errors[0].text,
      'Compile Lens: the selected interpreter (/usr/bin/python3) has no torch. Pick an interpreter with PyTorch installed.',
    );
    assert.deepEqual(errors[0].items, ['Select Interpreter']);
    // No Python extension: the button opens the setting.
    assert.deepEqual(stub.executed.at(-1), {
      command: 'workbench.action.openSettings',
      args: ['compileLens.interpreter'],
    });
    // Another interpreter without torch is worth saying once more.
    last().emit('compileLens/status', { ...params, interpreter: '/other/python' });
    await settle(10);
    assert.equal(stub.messages.filter((m) => m.level === 'error').length, 2);
  });

  test('with the Python extension, the button runs python.setInterpreter', async () => {
    installPythonExtension('/usr/bin/python3');
    await start();
    stub.nextChoice = 'Select Interpreter';
    last().emit('compileLens/status', { state: 'no-torch', interpreter: '/usr/bin/python3' });
    await settle(10);
    assert.equal(stub.executed.at(-1)?.command, 'python.setInterpreter');
  });
});

describe('an imported torch trace is said as the CLI says it', () => {
  beforeEach(resetStubs);
  afterEach(async () => {
    await deactivate();
    context.disposeAll();
  });

  const DIVERGENCE = 'ranks part at compile 0/1: rank 1 recompile of `forward` (guard: size mismatch), rank 0 did not (2 compile events apart)';
  const answer = {
    imported: true,
    files: ['file:///work/project/train.py'],
    diagnostics: 3,
    ranks: [{ rank: 0, file: 'r0.log' }, { rank: 1, file: 'r1.log' }],
    rank_divergence: [{ step: '0/1' }],
    divergence: [DIVERGENCE],
    unmapped: [{ path: '/mnt/job/lib/helper.py', why: 'no workspace file of that name' }],
    unmapped_findings: 2,
    notes: ['r1.log: 1 record of a shape torch does not write was skipped (line 7)'],
  };

  async function importWith(result: unknown): Promise<void> {
    await start();
    const middleware = last().clientOptions.middleware;
    await middleware.executeCommand('compileLens.importTrace', ['/tmp/trace'], async () => result);
    await settle();
  }

  test('ranks that part are an error notification naming the ranks', async () => {
    stub.nextChoice = 'Show Output';
    await importWith(answer);
    const error = stub.messages.find((m) => m.level === 'error');
    assert.ok(error, JSON.stringify(stub.messages));
    assert.equal(error.text, `Compile Lens: ${DIVERGENCE}`);
    assert.ok(error.text.includes('rank 1') && error.text.includes('rank 0'));
    assert.ok(stub.channels[0].shown >= 1, 'Show Output opens the channel');
  });

  test('notes, unmapped paths and the divergence go to the output channel', async () => {
    await importWith(answer);
    const lines = stub.channels[0].lines.join('\n');
    assert.ok(lines.includes(`[error] error: ${DIVERGENCE}`), lines);
    assert.ok(lines.includes('[warn] note: r1.log: 1 record of a shape'), lines);
    assert.ok(lines.includes('[info]   /mnt/job/lib/helper.py: no workspace file of that name'), lines);
  });

  test('the summary counts what is shown and what is not', async () => {
    await importWith(answer);
    const summary = stub.messages.find((m) => m.level === 'warning');
    assert.deepEqual(summary, {
      level: 'warning',
      text: 'Compile Lens: imported torch trace (2 logs): 3 findings in 1 file; 2 findings in files not mapped '
        + 'onto the workspace (listed in the output); 1 path not mapped; 1 note; ranks part (1)',
      items: ['Show Output'],
    });
  });

  test('a clean import is one information message', async () => {
    await importWith({ imported: true, files: ['file:///w/a.py'], diagnostics: 1, ranks: [{ rank: null, file: 'a.log' }],
      rank_divergence: [], divergence: [], unmapped: [], unmapped_findings: 0, notes: [] });
    assert.deepEqual(stub.messages, [{ level: 'info', text: 'Compile Lens: imported torch trace (1 log): 1 finding in 1 file',
      items: [] }]);
  });

  test('a refused import still says why', async () => {
    await importWith({ imported: false, reason: 'trace.log: not a torch structured trace' });
    assert.deepEqual(stub.messages.map((m) => m.text), ['Compile Lens: trace.log: not a torch structured trace']);
  });
});
