import * as assert from 'node:assert/strict';
import * as os from 'node:os';
import { beforeEach, describe, test } from 'node:test';
import { contributedKeys, resolveVariables, serverSettings } from '../src/settings';
import { packageJSON, resetStubs } from './helpers';
import { stub, Uri, workspace } from './stubs/vscode';

const folder = () => workspace.workspaceFolders?.[0] as never;

describe('settings mapping', () => {
  beforeEach(resetStubs);

  test('contributed keys are flat and dotted, without the prefix', () => {
    const keys = contributedKeys(packageJSON);
    for (const key of [
      'interpreter',
      'device',
      'worker.timeoutSeconds',
      'worker.memoryLimitMB',
      'benchmark.onSave',
      'benchmark.mode',
      'benchmark.maxSeconds',
      'benchmark.precision',
      'benchmark.optIn',
      'gpuBusyThreshold',
    ]) {
      assert.ok(keys.includes(key), key);
    }
    assert.ok(keys.every((key) => !key.startsWith('compileLens.')));
  });

  test('defaults reach the server as one flat object, interpreter left out', () => {
    assert.deepEqual(serverSettings(contributedKeys(packageJSON), folder()), {
      device: 'auto',
      'worker.timeoutSeconds': 60,
      'worker.memoryLimitMB': null, // half of the machine's memory, decided by the server
      'worker.spare': null, // a spare trace worker where the machine has 4 cores or more
      'benchmark.onSave': true,
      'benchmark.mode': 'default',
      'benchmark.maxSeconds': 60,
      'benchmark.precision': 'auto', // as a recorded run used, else torch's defaults
      'benchmark.optIn': [], // parts run whatever the budget: none asked
      'lineCosts.inlayHints': true, // hints on the costly lines after a measurement
      remoteCache: null, // the team's Redis: unset, the environment's (if it turns one on)
      gpuBusyThreshold: 50, // background measurements wait above 50 % GPU use by others
      // the GPU bill: unset (null) until the team gives its figures; no money shown without a price
      'bill.gpuPricePerHour': null,
      'bill.gpus': 1,
      'bill.trainingHoursPerMonth': null,
      'bill.stepsPerRun': null,
      'bill.runsPerMonth': null,
      'bill.restartsPerRun': 0,
      'bill.migrationDays': null,
      'bill.engineerDayRate': null,
    });
  });

  test('user values override defaults', () => {
    stub.config['compileLens.device'] = 'cuda';
    stub.config['compileLens.worker.timeoutSeconds'] = 5;
    const settings = serverSettings(contributedKeys(packageJSON), folder());
    assert.equal(settings.device, 'cuda');
    assert.equal(settings['worker.timeoutSeconds'], 5);
  });

  test('${workspaceFolder} is resolved in string values', () => {
    stub.defaults['compileLens.cacheDir'] = '${workspaceFolder}/.compile-lens';
    const settings = serverSettings(['cacheDir'], folder());
    assert.equal(settings.cacheDir, `${Uri.file('/work/project').fsPath}/.compile-lens`);
  });

  test('variables: workspace folder, basename, home, env; unknown ones stay', () => {
    process.env.CL_TEST_VAR = 'value';
    const f = folder();
    assert.equal(resolveVariables('${workspaceFolderBasename}', f), 'project');
    assert.equal(resolveVariables('${userHome}/x', f), `${os.homedir()}/x`);
    assert.equal(resolveVariables('${env:CL_TEST_VAR}', f), 'value');
    assert.equal(resolveVariables('${command:foo}', f), '${command:foo}');
    assert.equal(resolveVariables('${workspaceFolder}', undefined), '${workspaceFolder}');
  });
});
