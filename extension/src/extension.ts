// Wiring only: what each piece does lives in python.ts, settings.ts, server.ts, status.ts and report.ts.
import * as vscode from 'vscode';
import { onDidChangePythonInterpreter } from './python';
import { ReportView, SHOW_REPORT } from './report';
import { CompileLensServer, SHOW_OUTPUT } from './server';
import { contributedKeys, SECTION } from './settings';
import { Status } from './status';

/** How long a burst of interpreter changes is collected before the server is restarted. */
export const RESTART_DEBOUNCE_MS = 500;

let server: CompileLensServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel('Compile Lens', { log: true });
  const status = new Status(log);
  const keys = contributedKeys(context.extension.packageJSON);
  server = new CompileLensServer(context.extensionPath, keys, log, status);
  const srv = server;
  const report = new ReportView(log);
  context.subscriptions.push(log, status, srv, report);

  let restartTimer: NodeJS.Timeout | undefined;
  const restartSoon = (reason: string): void => {
    clearTimeout(restartTimer);
    restartTimer = setTimeout(() => void srv.restartIfCommandChanged(reason), RESTART_DEBOUNCE_MS);
  };
  context.subscriptions.push({ dispose: () => clearTimeout(restartTimer) });

  context.subscriptions.push(
    // compileLens.analyzeFile and compileLens.clearCache (and later server commands) are the
    // server's: vscode-languageclient registers them from its executeCommandProvider, and
    // registering them here too would throw. Palette calls get the active file via middleware.
    vscode.commands.registerCommand('compileLens.restartServer', () => srv.restart('command')),
    vscode.commands.registerCommand(SHOW_OUTPUT, () => log.show()),
    vscode.commands.registerCommand(SHOW_REPORT, (uri?: unknown) => report.show(uri)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.interpreter`)) {
        restartSoon('compileLens.interpreter changed');
      }
      if (event.affectsConfiguration(SECTION)) {
        void srv.sendSettings();
      }
    }),
    // Restricted Mode runs static lints only; once trusted, start over in full mode.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void srv.restart('workspace trusted')),
  );

  const pythonListener = await onDidChangePythonInterpreter(() =>
    restartSoon('Python extension interpreter changed'),
  );
  if (pythonListener) {
    context.subscriptions.push(pythonListener);
  }

  await srv.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
