import * as assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { DEFAULT_INTERPRETER, interpreterFromSetting, resolveInterpreter } from '../src/python';
import { installPythonExtension, resetStubs } from './helpers';
import { stub, Uri, workspace } from './stubs/vscode';

const folder = () => workspace.workspaceFolders?.[0] as never;

describe('interpreter resolution', () => {
  beforeEach(resetStubs);

  test('the compileLens.interpreter setting comes first', async () => {
    stub.config['compileLens.interpreter'] = ['/opt/torch/bin/python'];
    installPythonExtension('/usr/bin/python-from-extension');
    assert.deepEqual(await resolveInterpreter(folder()), {
      command: ['/opt/torch/bin/python'],
      source: 'setting',
    });
  });

  test('the setting may be a plain string and use ${workspaceFolder}', async () => {
    stub.config['compileLens.interpreter'] = '${workspaceFolder}/.venv/bin/python';
    const result = await resolveInterpreter(folder());
    assert.deepEqual(result.command, [`${Uri.file('/work/project').fsPath}/.venv/bin/python`]);
    assert.equal(result.source, 'setting');
  });

  test('extra items in the setting are kept as arguments', () => {
    assert.deepEqual(interpreterFromSetting(['conda', 'run', '-n', 'torch', 'python'], undefined), [
      'conda',
      'run',
      '-n',
      'torch',
      'python',
    ]);
  });

  test('blank entries count as unset', () => {
    assert.deepEqual(interpreterFromSetting(['', '  '], undefined), []);
    assert.deepEqual(interpreterFromSetting(42, undefined), []);
  });

  test('then the Python extension active environment', async () => {
    stub.config['compileLens.interpreter'] = [];
    installPythonExtension('/envs/torch/bin/python');
    assert.deepEqual(await resolveInterpreter(folder()), {
      command: ['/envs/torch/bin/python'],
      source: 'python-extension',
    });
  });

  test('then python3 on PATH when there is no Python extension', async () => {
    assert.deepEqual(await resolveInterpreter(folder()), {
      command: [DEFAULT_INTERPRETER],
      source: 'default',
    });
    assert.equal(DEFAULT_INTERPRETER, 'python3');
  });

  test('then python3 when the Python extension has no environment', async () => {
    installPythonExtension(undefined);
    assert.equal((await resolveInterpreter(folder())).source, 'default');
  });

  test('a failing Python extension falls back to python3 and logs why', async () => {
    installPythonExtension('/envs/x/bin/python', { fail: true });
    const warnings: string[] = [];
    const log = { warn: (m: string) => warnings.push(m) } as never;
    assert.equal((await resolveInterpreter(folder(), log)).source, 'default');
    assert.match(warnings[0], /resolve failed/);
  });
});
