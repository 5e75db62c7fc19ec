// Starting, stopping and restarting the Python language server (`<python> -m compile_lens`).
import * as fs from 'fs';
import * as path from 'path';
import * as readline from 'readline';
import type { Readable } from 'stream';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  type LanguageClientOptions,
  type Middleware,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { resolveInterpreter } from './python';
import { hoverMiddleware, SHOW_REPORT } from './report';
import { primaryFolder, serverSettings } from './settings';
import { STATUS_NOTIFICATION, type Status, type StatusParams } from './status';

export const CLIENT_ID = 'compileLens';
/**
 * Commands this extension runs itself (registered in extension.ts), sent to the server as the
 * `clientCommands` initialization option: only then do its lenses and hovers use them. Other
 * LSP clients get commands the server executes instead.
 */
export const SHOW_OUTPUT = 'compileLens.showOutput';
export const CLIENT_COMMANDS = [SHOW_OUTPUT, SHOW_REPORT];
export const CLIENT_NAME = 'Compile Lens';

export interface ServerCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** `<platform>-<arch>` of the extension host, e.g. `linux-x64` (on Remote: of the remote host). */
export function hostPlatform(): string {
  return `${process.platform}-${process.arch}`;
}

/** Platforms whose native Python packages (psutil) ship in `bundled/native/<platform>`. */
export const BUNDLED_NATIVE_PLATFORMS = ['linux-x64'];

/**
 * Where the server package and its dependencies live: `bundled/tool`, `bundled/libs` (pure
 * Python) and `bundled/native/<platform>` (psutil) in a packaged extension, filled by
 * scripts/e2e/vsix.sh; in a source checkout without them, the repository's `server/` folder.
 * On a platform without a bundled psutil the interpreter's own one is used.
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

function sameCommand(a: ServerCommand | undefined, b: ServerCommand): boolean {
  return (
    a !== undefined &&
    a.command === b.command &&
    a.args.join('\0') === b.args.join('\0') &&
    a.env.PYTHONPATH === b.env.PYTHONPATH
  );
}

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const PYTHON_LEVELS: Record<string, LogLevel> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  WARN: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};
const LOG_LINE =
  /^(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?\s+)?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?::|\s)\s*(.*)$/;

/**
 * One line of the server's stderr (Python logging, `%(asctime)s %(levelname)s %(name)s: ...`)
 * as a log level and message, without the timestamp the output channel adds again. Lines without
 * a level (tracebacks, prints) keep the level of the line before them.
 */
export function parseServerLogLine(
  line: string,
  previous: LogLevel = 'info',
): { level: LogLevel; message: string } {
  const match = LOG_LINE.exec(line);
  if (!match) {
    return { level: previous, message: line };
  }
  return { level: PYTHON_LEVELS[match[1]], message: match[2] };
}

/** Server stderr into the output channel at the levels the server logged them. */
function pipeServerLog(input: Readable, channel: vscode.LogOutputChannel): void {
  let level: LogLevel = 'info';
  readline
    .createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
    .on('line', (line: string) => {
      const parsed = parseServerLogLine(line, level);
      level = parsed.level;
      channel[level](parsed.message);
    });
}

/**
 * Palette invocations carry no arguments: fill in the active editor's document. A server command
 * that answers `{started: false, reason}` (untrusted workspace, nothing traced yet) says why.
 */
export const commandMiddleware: Middleware = {
  executeCommand: async (command, args, next) => {
    const needsUri = command === 'compileLens.analyzeFile' || command === 'compileLens.measure'
      || command === 'compileLens.saveTrace';
    if (needsUri && (args.length === 0 || args[0] === undefined)) {
      const uri = vscode.window.activeTextEditor?.document.uri;
      if (!uri) {
        void vscode.window.showWarningMessage('Compile Lens: open a Python file first.');
        return undefined;
      }
      args = [uri.toString(), ...args.slice(1)];
    }
    if (command === 'compileLens.importTrace' && (args.length === 0 || !args[0])) {
      // a TORCH_TRACE folder (one log per rank) or one log; scripts and the e2e pass the path
      const picked = await vscode.window.showOpenDialog({
        canSelectFiles: true, canSelectFolders: true, canSelectMany: false, openLabel: 'Import torch trace',
      });
      if (!picked || picked.length === 0) {
        return undefined;
      }
      args = [picked[0].fsPath];
    }
    const result: unknown = await next(command, args);
    const answer = result as { started?: unknown; imported?: unknown; reason?: unknown; dir?: unknown } | undefined;
    if (answer && (answer.started === false || answer.imported === false) && typeof answer.reason === 'string') {
      void vscode.window.showInformationMessage(`Compile Lens: ${answer.reason}`);
    } else if (command === 'compileLens.saveTrace' && answer && typeof answer.dir === 'string') {
      // the folder TORCH_TRACE would have written: `tlparse` reads each file in it
      void vscode.window.showInformationMessage(`Compile Lens: torch trace saved in ${answer.dir} (run tlparse on it)`);
    }
    return result;
  },
};

export class CompileLensServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private current: ServerCommand | undefined;
  /** Start/stop/restart run one after another, never interleaved. */
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  constructor(
    private readonly extensionPath: string,
    private readonly settingKeys: readonly string[],
    private readonly log: vscode.LogOutputChannel,
    private readonly status: Status,
  ) {}

  get running(): LanguageClient | undefined {
    return this.client;
  }

  private serialize<T>(task: () => Promise<T>): Promise<T> {
    const next = this.queue.then(task, task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  async resolveCommand(): Promise<ServerCommand> {
    const folder = primaryFolder();
    const interpreter = await resolveInterpreter(folder, this.log);
    this.log.info(`interpreter (${interpreter.source}): ${interpreter.command.join(' ')}`);
    return serverCommand(interpreter.command, this.extensionPath);
  }

  initializationOptions(): { trusted: boolean; settings: Record<string, unknown>; clientCommands: string[] } {
    return {
      trusted: vscode.workspace.isTrusted,
      settings: serverSettings(this.settingKeys, primaryFolder()),
      clientCommands: [...CLIENT_COMMANDS],
    };
  }

  start(): Promise<void> {
    return this.serialize(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.serialize(() => this.doStop());
  }

  restart(reason: string): Promise<void> {
    return this.serialize(async () => {
      this.log.info(`restarting the server: ${reason}`);
      await this.doStop();
      await this.doStart();
    });
  }

  /** Restarts only when the resolved command line differs from the running one. */
  restartIfCommandChanged(reason: string): Promise<boolean> {
    return this.serialize(async () => {
      const next = await this.resolveCommand();
      if (this.client && sameCommand(this.current, next)) {
        return false;
      }
      this.log.info(`restarting the server: ${reason}`);
      await this.doStop();
      await this.doStart(next);
      return true;
    });
  }

  /** Pushes the current settings to the running server (flat dotted keys). */
  async sendSettings(): Promise<void> {
    const client = this.client;
    if (!client || !client.isRunning()) {
      return;
    }
    const { settings } = this.initializationOptions();
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings });
  }

  private async doStart(command?: ServerCommand): Promise<void> {
    if (this.disposed) {
      return;
    }
    const resolved = command ?? (await this.resolveCommand());
    const folder = primaryFolder();
    const serverOptions: ServerOptions = {
      // No `transport`: the stdio transport would append `--stdio`, which the server rejects.
      command: resolved.command,
      args: resolved.args,
      options: { env: resolved.env, cwd: folder?.uri.fsPath },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: this.initializationOptions(),
      middleware: { ...commandMiddleware, ...hoverMiddleware },
      workspaceFolder: folder,
      stdioOptions: {
        stdout: (input, channel) => pipeServerLog(input, channel),
        stderr: (input, channel) => pipeServerLog(input, channel),
      },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (params: StatusParams) => {
      this.status.update(params);
    });
    client.onDidChangeState((event) => {
      if (event.newState === State.Stopped && this.client === client) {
        this.status.update({ state: 'stopped', detail: 'server stopped — see the output' });
      }
    });
    this.client = client;
    this.current = resolved;
    this.status.update({ state: 'starting', detail: 'server', interpreter: resolved.command });
    this.log.info(`starting: ${resolved.command} ${resolved.args.join(' ')}`);
    const nativeHint = BUNDLED_NATIVE_PLATFORMS.includes(hostPlatform())
      ? ''
      : ` psutil is bundled for ${BUNDLED_NATIVE_PLATFORMS.join(', ')} only; on ${hostPlatform()} ` +
        `install it next to torch: ${resolved.command} -m pip install psutil`;
    if (nativeHint) {
      this.log.info(nativeHint.trim());
    }
    try {
      await client.start();
    } catch (err) {
      this.log.error(`the server did not start: ${String(err)}.${nativeHint}`);
      this.status.update({
        state: 'error',
        detail: `the server did not start (${resolved.command}); see the output`,
        interpreter: resolved.command,
      });
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.current = undefined;
    if (!client) {
      return;
    }
    try {
      // dispose() = stop (shutdown/exit, then kill after the timeout) and no restart afterwards.
      await client.dispose(5000);
    } catch (err) {
      this.log.warn(`stopping the server: ${String(err)}`);
    }
  }

  dispose(): void {
    void this.stop();
    this.disposed = true;
  }
}
