import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nativeHint } from '../src/bundled';

describe('bundled native packages', () => {
  test('where psutil ships, nothing is said; elsewhere, how to install it', () => {
    assert.equal(nativeHint('/venv/bin/python', 'linux-x64'), '');
    assert.equal(
      nativeHint('/venv/bin/python', 'darwin-arm64'),
      'psutil is bundled for linux-x64 only; on darwin-arm64 install it next to torch: /venv/bin/python -m pip install psutil',
    );
  });
});
