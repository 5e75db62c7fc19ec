// The torch comparison's command line: the server's interpreter and environment, the CLI instead of
// the server, the file and the other interpreter; and the command is declared.
import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compareCommand } from '../src/compare';
import { COMPARE_TORCH } from '../src/constants';
import { packageJSON as pkg } from './helpers';

describe('compare with another torch', () => {
  test('runs check --compare-with with the server interpreter, its arguments and environment', () => {
    const server = { command: '/venv/bin/python', args: ['-X', 'utf8', '-m', 'compile_lens'], env: { PYTHONPATH: '/b' } };
    const run = compareCommand(server, '/work/net.py', '/next/bin/python');
    assert.equal(run.command, '/venv/bin/python');
    assert.deepEqual(run.args, ['-X', 'utf8', '-m', 'compile_lens.cli', 'check', '/work/net.py', '--compare-with', '/next/bin/python']);
    assert.deepEqual(run.env, { PYTHONPATH: '/b' });
  });

  test('package.json declares the command and the setting, restricted in untrusted workspaces', () => {
    assert.ok(pkg.contributes.commands.some((c: { command: string }) => c.command === COMPARE_TORCH));
    assert.equal(pkg.contributes.configuration.properties['compileLens.compareInterpreter'].type, 'string');
    assert.ok(pkg.capabilities.untrustedWorkspaces.restrictedConfigurations.includes('compileLens.compareInterpreter'));
  });
});
