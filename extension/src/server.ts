// The language client's lifecycle: start, stop and restart the Python language server, one after
// another, never interleaved; push settings to it; feed its status to the status item.
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { nativeHint } from './bundled';
import { CLIENT_COMMANDS, CLIENT_ID, CLIENT_NAME, STATUS_NOTIFICATION } from './constants';
import { commandMiddleware } from './middleware';
import { resolveInterpreter } from './python';
import { hoverMiddleware } from './report';
import { type ServerCommand, sameCommand, serverCommand } from './serverCommand';
import { pipeServerLog } from './serverLog';
import { primaryFolder, serverSettings } from './settings';
import type { Status, StatusParams } from './status';

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
      middleware: { ...commandMiddleware(this.log), ...hoverMiddleware },
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
    const hint = nativeHint(resolved.command);
    if (hint) {
      this.log.info(hint);
    }
    try {
      await client.start();
    } catch (err) {
      this.log.error(`the server did not start: ${String(err)}.${hint ? ` ${hint}` : ''}`);
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
