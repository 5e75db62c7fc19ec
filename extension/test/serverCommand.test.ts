import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { serverCommand } from '../src/serverCommand';

describe('server command line', () => {
  function packagedExtension(): string {
    const ext = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-ext-'));
    fs.mkdirSync(path.join(ext, 'bundled', 'tool', 'compile_lens'), { recursive: true });
    fs.mkdirSync(path.join(ext, 'bundled', 'libs'), { recursive: true });
    fs.mkdirSync(path.join(ext, 'bundled', 'native', 'linux-x64'), { recursive: true });
    return ext;
  }

  test('uses the bundled server, libs and linux-x64 psutil when the extension ships them', () => {
    const ext = packagedExtension();
    const env = { PATH: '/bin', PYTHONPATH: '/user' };
    const cmd = serverCommand(['/venv/bin/python'], ext, env, 'linux-x64');
    assert.equal(cmd.command, '/venv/bin/python');
    assert.deepEqual(cmd.args, ['-m', 'compile_lens']);
    const bundled = path.join(ext, 'bundled');
    assert.equal(
      cmd.env.PYTHONPATH,
      [
        path.join(bundled, 'tool'),
        path.join(bundled, 'libs'),
        path.join(bundled, 'native', 'linux-x64'),
        '/user',
      ].join(path.delimiter),
    );
    assert.equal(cmd.env.PYTHONSAFEPATH, '1');
    assert.equal(cmd.env.PATH, '/bin');
  });

  test('elsewhere psutil comes from the interpreter environment', () => {
    const ext = packagedExtension();
    const cmd = serverCommand(['python3'], ext, {}, 'darwin-arm64');
    const bundled = path.join(ext, 'bundled');
    assert.equal(
      cmd.env.PYTHONPATH,
      [path.join(bundled, 'tool'), path.join(bundled, 'libs')].join(path.delimiter),
    );
  });

  test('falls back to the source checkout server/ folder', () => {
    const ext = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-ext-'));
    const cmd = serverCommand(['python3', '-X', 'dev'], ext, {});
    assert.deepEqual(cmd.args, ['-X', 'dev', '-m', 'compile_lens']);
    assert.equal(cmd.env.PYTHONPATH, path.join(ext, 'server'));
    assert.ok(!cmd.args.includes('--stdio'));
  });
});
