import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { statusDetail, statusText } from '../src/status';

describe('status text', () => {
  test('activity states name what they work on, once', () => {
    assert.equal(statusText({ state: 'tracing', detail: 'Net' }), 'Compile Lens: tracing Net');
    assert.equal(statusText({ state: 'tracing', detail: 'tracing Net' }), 'Compile Lens: tracing Net');
    assert.equal(statusText({ state: 'starting', detail: 'worker' }), 'Compile Lens: starting worker');
    assert.equal(statusText({ state: 'benchmarking' }), 'Compile Lens: benchmarking');
  });

  test('other states show the state; the detail moves to the second line', () => {
    assert.equal(statusText({ state: 'no-torch', detail: 'x' }), 'Compile Lens: no torch');
    assert.equal(statusText({ state: 'restricted', detail: 'static lints only' }), 'Compile Lens: restricted');
    assert.equal(
      statusDetail({ state: 'restricted', detail: 'static lints only', torch: null, device: null }),
      'static lints only',
    );
    assert.equal(statusDetail({ state: 'idle', torch: '2.13.0+cpu', device: 'cpu' }), 'torch 2.13.0+cpu · cpu');
  });

  test('a measurement waiting for a busy GPU says who uses it', () => {
    assert.equal(
      statusText({ state: 'waiting', detail: 'GPU busy (python train.py, 92%)' }),
      'Compile Lens: waiting: GPU busy (python train.py, 92%)',
    );
    assert.equal(statusDetail({ state: 'waiting', detail: 'GPU busy (python train.py, 92%)', device: 'cuda (H100)' }),
      'cuda (H100)');
  });
});
