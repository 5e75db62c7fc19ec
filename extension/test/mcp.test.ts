// The MCP server for agent mode: registered only where VS Code has the API (looked up at run time),
// with the language server's interpreter and `--trust` only for a trusted workspace, withdrawn by
// compileLens.mcp.enabled; package.json declares the provider id and the setting.
import * as assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { MCP_PROVIDER_ID, mcpApi, mcpCommand, registerMcpServer } from '../src/mcp';
import { serverSettings } from '../src/settings';
import { packageJSON as pkg, resetStubs } from './helpers';
import * as vscode from './stubs/vscode';

const SERVER = { command: '/venv/bin/python', args: ['-X', 'utf8', '-m', 'compile_lens'], env: { PYTHONPATH: '/b' } };

interface Registered {
  id: string;
  provider: { onDidChangeMcpServerDefinitions(listener: () => void): unknown; provideMcpServerDefinitions(): Promise<any[]> };
}

/** A VS Code with the MCP API, recording what is registered. */
function fakeApi() {
  const registered: Registered[] = [];
  let disposed = 0;
  class McpStdioServerDefinition {
    cwd: unknown;
    constructor(
      readonly label: string,
      readonly command: string,
      readonly args: string[],
      readonly env: Record<string, string>,
      readonly version: string,
    ) {}
  }
  const api = {
    lm: {
      registerMcpServerDefinitionProvider(id: string, provider: Registered['provider']) {
        registered.push({ id, provider });
        return { dispose: () => (disposed += 1) };
      },
    },
    McpStdioServerDefinition,
  };
  return { api, registered, disposedCount: () => disposed };
}

describe('MCP server for agent mode', () => {
  beforeEach(resetStubs);

  test('no API (this VS Code, the stub): nothing registered, no error', () => {
    assert.equal(mcpApi(), undefined);
    assert.equal(registerMcpServer(async () => SERVER, '0.1.0'), undefined);
    assert.equal(mcpApi({ lm: {} }), undefined);
    assert.equal(mcpApi({ lm: { registerMcpServerDefinitionProvider() {} } }), undefined); // no McpStdioServerDefinition
  });

  test('an API that refuses the registration: no error, the reason to the log', () => {
    const errors: unknown[] = [];
    const refusing = {
      lm: { registerMcpServerDefinitionProvider() { throw new Error('not allowed here'); } },
      McpStdioServerDefinition: class {},
    };
    assert.equal(registerMcpServer(async () => SERVER, '0.1.0', refusing, (e) => errors.push(e)), undefined);
    assert.match(String(errors[0]), /not allowed here/);
  });

  test('the command: the server interpreter, its arguments and environment, `mcp --trust` per folder', () => {
    const run = mcpCommand(SERVER, ['/work/a', '/work/b']);
    assert.equal(run.command, '/venv/bin/python');
    assert.deepEqual(run.args, ['-X', 'utf8', '-m', 'compile_lens.cli', 'mcp', '--trust', '/work/a', '--trust', '/work/b']);
    assert.deepEqual(run.env, { PYTHONPATH: '/b' });
  });

  test('a trusted workspace: one stdio server that trusts its folder, run in it', async () => {
    const fake = fakeApi();
    const handle = registerMcpServer(async () => SERVER, '0.1.0', fake.api);
    assert.ok(handle);
    assert.equal(fake.registered.length, 1);
    assert.equal(fake.registered[0].id, MCP_PROVIDER_ID);
    const [definition] = await fake.registered[0].provider.provideMcpServerDefinitions();
    assert.equal(definition.label, 'Compile Lens');
    assert.deepEqual(definition.args, ['-X', 'utf8', '-m', 'compile_lens.cli', 'mcp', '--trust', '/work/project']);
    assert.equal(definition.version, '0.1.0');
    assert.equal(definition.cwd.fsPath, '/work/project');
    handle.dispose();
    assert.equal(fake.disposedCount(), 1);
  });

  test('Restricted Mode: no --trust (the tools run no code); trust granted: definitions change', async () => {
    vscode.workspace.isTrusted = false;
    const fake = fakeApi();
    registerMcpServer(async () => SERVER, '0.1.0', fake.api);
    const { provider } = fake.registered[0];
    const [definition] = await provider.provideMcpServerDefinitions();
    assert.ok(!definition.args.includes('--trust'));
    let changes = 0;
    provider.onDidChangeMcpServerDefinitions(() => (changes += 1));
    vscode.workspace.isTrusted = true;
    vscode.stub.grantTrust.fire();
    assert.equal(changes, 1);
    const [after] = await provider.provideMcpServerDefinitions();
    assert.ok(after.args.includes('--trust'));
  });

  test('compileLens.mcp.enabled false: no server, and turning it off announces the change', async () => {
    const fake = fakeApi();
    registerMcpServer(async () => SERVER, '0.1.0', fake.api);
    const { provider } = fake.registered[0];
    let changes = 0;
    provider.onDidChangeMcpServerDefinitions(() => (changes += 1));
    vscode.stub.changeConfig({ 'compileLens.mcp.enabled': false });
    assert.equal(changes, 1);
    assert.deepEqual(await provider.provideMcpServerDefinitions(), []);
  });

  test('package.json declares the provider and the setting; the server never receives it', () => {
    assert.deepEqual(pkg.contributes.mcpServerDefinitionProviders.map((p: { id: string }) => p.id), [MCP_PROVIDER_ID]);
    const setting = pkg.contributes.configuration.properties['compileLens.mcp.enabled'];
    assert.equal(setting.type, 'boolean');
    assert.equal(setting.default, true);
    const keys = Object.keys(pkg.contributes.configuration.properties).map((k) => k.replace(/^compileLens\./, ''));
    assert.ok(!('mcp.enabled' in serverSettings(keys, undefined)));
  });
});
