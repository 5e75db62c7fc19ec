// Wiring only: ids live in constants.ts; the interpreter in python.ts; settings in settings.ts; the
// server's command line in bundled.ts and serverCommand.ts, its log in serverLog.ts, its commands'
// client side in middleware.ts, its lifecycle in server.ts; the status item in status.ts; the
// compile report in report.ts; the captured graphs' documents in capturedGraph.ts; the torch comparison
// in compare.ts; the MCP server for agent mode in mcp.ts.
import * as vscode from 'vscode';
import { CapturedGraphs } from './capturedGraph';
import { compareTorch } from './compare';
import {
  COMPARE_TORCH,
  GRAPH_SCHEME,
  RESTART_SERVER,
  SECTION,
  SHOW_CAPTURED_GRAPH,
  SHOW_KERNELS,
  SHOW_OUTPUT,
  SHOW_REPORT,
} from './constants';
import { registerMcpServer } from './mcp';
import { onDidChangePythonInterpreter } from './python';
import { ReportView } from './report';
import { CompileLensServer } from './server';
import { contributedKeys } from './settings';
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
  const graphs = new CapturedGraphs();
  context.subscriptions.push(log, status, srv, report);

  let restartTimer: NodeJS.Timeout | undefined;
  const restartSoon = (reason: string): void => {
    clearTimeout(restartTimer);
    restartTimer = setTimeout(() => void srv.restartIfCommandChanged(reason), RESTART_DEBOUNCE_MS);
  };
  context.subscriptions.push({ dispose: () => clearTimeout(restartTimer) });

  context.subscriptions.push(
    // The server's commands (constants.ts) are registered by vscode-languageclient from its
    // executeCommandProvider; registering them here too would throw. Palette calls get the
    // active file via middleware.ts.
    vscode.commands.registerCommand(RESTART_SERVER, () => srv.restart('command')),
    vscode.commands.registerCommand(SHOW_OUTPUT, () => log.show()),
    vscode.commands.registerCommand(SHOW_REPORT, (uri?: unknown, target?: unknown) => report.show(uri, target)),
    vscode.commands.registerCommand(COMPARE_TORCH, () => compareTorch(() => srv.resolveCommand())),
    vscode.commands.registerCommand(SHOW_CAPTURED_GRAPH, (uri: unknown, target: unknown) => graphs.show(uri, target)),
    vscode.commands.registerCommand(SHOW_KERNELS, (uri: unknown, line: unknown) => graphs.showKernels(uri, line)),
    vscode.workspace.registerTextDocumentContentProvider(GRAPH_SCHEME, graphs),
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

  // VS Code's agent mode gets the same tools as an MCP server, where this VS Code has the API.
  const mcp = registerMcpServer(() => srv.resolveCommand(), String(context.extension.packageJSON.version ?? ''), undefined,
    (error) => log.warn(`the MCP server for agent mode is not registered: ${String(error)}`));
  if (mcp) {
    context.subscriptions.push(mcp);
  }

  await srv.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
