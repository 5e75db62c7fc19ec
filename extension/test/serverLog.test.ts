import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseServerLogLine } from '../src/serverLog';

describe('server log levels', () => {
  test('Python logging lines keep their level, lose their timestamp', () => {
    assert.deepEqual(
      parseServerLogLine('2026-12-02 14:22:27,103 WARNING compile_lens: worker slow'),
      { level: 'warn', message: 'compile_lens: worker slow' },
    );
    assert.deepEqual(parseServerLogLine('INFO:compile_lens:started'), {
      level: 'info',
      message: 'compile_lens:started',
    });
    assert.equal(parseServerLogLine('2026-12-02 14:22:27,103 ERROR x: boom').level, 'error');
    assert.equal(parseServerLogLine('2026-12-02 14:22:27,103 DEBUG x: y').level, 'debug');
  });

  test('lines without a level continue the previous one (tracebacks)', () => {
    assert.deepEqual(parseServerLogLine('Traceback (most recent call last):', 'error'), {
      level: 'error',
      message: 'Traceback (most recent call last):',
    });
    assert.equal(parseServerLogLine('hello from a print()').level, 'info');
  });
});
