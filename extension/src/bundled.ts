// Where the server package and its Python dependencies live: inside a packaged extension, or the
// repository's `server/` folder in a source checkout.
import * as fs from 'fs';
import * as path from 'path';

/** `<platform>-<arch>` of the extension host, e.g. `linux-x64` (on Remote: of the remote host). */
export function hostPlatform(): string {
  return `${process.platform}-${process.arch}`;
}

/** Platforms whose native Python packages (psutil) ship in `bundled/native/<platform>`. */
export const BUNDLED_NATIVE_PLATFORMS = ['linux-x64'];

/**
 * `bundled/tool`, `bundled/libs` (pure Python) and `bundled/native/<platform>` (psutil) in a
 * packaged extension, filled by scripts/e2e/vsix.sh; in a source checkout without them, the
 * repository's `server/` folder. On a platform without a bundled psutil the interpreter's own one
 * is used.
 */
export function serverPythonPath(extensionPath: string, platform = hostPlatform()): string[] {
  const bundled = path.join(extensionPath, 'bundled');
  const tool = path.join(bundled, 'tool');
  if (!fs.existsSync(path.join(tool, 'compile_lens'))) {
    return [path.join(extensionPath, 'server')];
  }
  const entries = [tool, path.join(bundled, 'libs')];
  const native = path.join(bundled, 'native', platform);
  if (fs.existsSync(native)) {
    entries.push(native);
  }
  return entries;
}

/** What to say where psutil is not bundled for this host ('' where it is). */
export function nativeHint(interpreter: string, platform = hostPlatform()): string {
  if (BUNDLED_NATIVE_PLATFORMS.includes(platform)) {
    return '';
  }
  return (
    `psutil is bundled for ${BUNDLED_NATIVE_PLATFORMS.join(', ')} only; on ${platform} ` +
    `install it next to torch: ${interpreter} -m pip install psutil`
  );
}
