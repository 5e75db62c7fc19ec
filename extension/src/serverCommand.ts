// The command line and environment that start the server: `<python> -m compile_lens`.
import * as path from 'path';
import { hostPlatform, serverPythonPath } from './bundled';

export interface ServerCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** The command line and environment that start the server with `interpreter` (argv list). */
export function serverCommand(
  interpreter: readonly string[],
  extensionPath: string,
  baseEnv: NodeJS.ProcessEnv = process.env,
  platform = hostPlatform(),
): ServerCommand {
  const [command, ...extra] = interpreter;
  const pythonPath = serverPythonPath(extensionPath, platform);
  if (baseEnv.PYTHONPATH) {
    pythonPath.push(baseEnv.PYTHONPATH);
  }
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(baseEnv)) {
    if (value !== undefined) {
      env[key] = value;
    }
  }
  // PYTHONSAFEPATH: a user folder named `compile_lens` in the cwd must not shadow the server.
  env.PYTHONSAFEPATH = '1';
  env.PYTHONPATH = pythonPath.join(path.delimiter);
  env.PYTHONUNBUFFERED = '1';
  return { command, args: [...extra, '-m', 'compile_lens'], env };
}

/** Whether `b` would start the same server as `a` (a restart is needed only when not). */
export function sameCommand(a: ServerCommand | undefined, b: ServerCommand): boolean {
  return (
    a !== undefined &&
    a.command === b.command &&
    a.args.join('\0') === b.args.join('\0') &&
    a.env.PYTHONPATH === b.env.PYTHONPATH
  );
}
